package policyk8s

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
	istiov1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/backstop-go/backstop/policyenvoy"
)

// Istio's defaults, for fields a VirtualService or DestinationRule leaves out.
const (
	// IstioDefaultAttempts is the retries of Istio's default retry policy, which
	// applies to an http entry without retries.
	IstioDefaultAttempts = 2
	// IstioDefaultBackoff is the base back-off (Envoy's): retry n waits up to
	// (2^n − 1) × base, at most 10 × base.
	IstioDefaultBackoff = 25 * time.Millisecond
)

// IstioDefaultRetryOn is the retryOn of Istio's default retry policy, and of a
// retries without retryOn: Envoy's conditions connect-failure, refused-stream,
// unavailable and cancelled, and the status 503 (retriable-status-codes).
func IstioDefaultRetryOn() []string {
	return []string{"connect-failure", "refused-stream", "unavailable", "cancelled", "503"}
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// virtualService reads a VirtualService: one Route per http entry that forwards to
// a destination.
func (r *reader) virtualService(w *walker, root *yaml3.Node) {
	var obj istiov1.VirtualService
	if !r.decodeObject(w, root, &obj) {
		return
	}
	spec := &obj.Spec
	docPos := docPositions(root, "http")
	entries := child(child(root, "spec"), "http")
	parents := slices.Clone(spec.GetGateways())
	if len(parents) == 0 {
		parents = []string{"mesh"} // Istio's default: the sidecars
	}
	for i, hr := range spec.GetHttp() {
		node := item(entries, i)
		if hr.GetDelegate() != nil {
			r.note(w.file, node, "VirtualService %s http[%d] delegates to VirtualService %s: its routes are read from that VirtualService",
				objectName(root), i, hr.GetDelegate().GetName())
			continue
		}
		if len(hr.GetRoute()) == 0 {
			continue // a redirect or direct response: no upstream, no retry
		}
		rt := &Route{Source: SourceIstio, Kind: "VirtualService", Namespace: obj.Namespace, Name: obj.Name, Rule: i,
			File: w.file, Hosts: slices.Clone(spec.GetHosts()), ParentRefs: parents, docPos: docPos, pos: map[string]pos{}}
		if node != nil {
			rt.Line, rt.Column = node.Line, node.Column
			budget := 2000
			record(node, nil, rt.pos, &budget)
		}
		for _, d := range hr.GetRoute() {
			h := d.GetDestination().GetHost()
			rt.Backends = append(rt.Backends, h)
			rt.services = append(rt.services, fqdn(h, obj.Namespace))
		}
		for _, m := range hr.GetMatch() {
			mm := Match{PathType: "prefix", Path: "/"}
			switch u := m.GetUri(); {
			case u.GetExact() != "":
				mm.PathType, mm.Path = "exact", u.GetExact()
			case u.GetPrefix() != "":
				mm.PathType, mm.Path = "prefix", u.GetPrefix()
			case u.GetRegex() != "":
				mm.PathType, mm.Path = "regex", u.GetRegex()
			}
			if me := m.GetMethod(); me != nil {
				mm.Method = me.GetExact()
				if mm.Method == "" {
					mm.Others = append(mm.Others, "method")
				}
			}
			m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
				if n := fd.JSONName(); n != "uri" && n != "method" && n != "name" {
					mm.Others = append(mm.Others, n)
				}
				return true
			})
			rt.Matches = append(rt.Matches, mm)
		}
		if len(rt.Matches) == 0 {
			rt.Matches = []Match{{PathType: "prefix", Path: "/"}}
		}
		at := []pathElem{key("spec"), key("http"), index(i)}
		r.istioRetry(w, rt, hr, node, at)
		r.set.Routes = append(r.set.Routes, rt)
	}
}

// istioRetry reads an http entry's timeout and retries as Istio converts them for
// Envoy.
func (r *reader) istioRetry(w *walker, rt *Route, hr *istiov1alpha3.HTTPRoute, node *yaml3.Node, at []pathElem) {
	rt.Timeout = durationOf(hr.GetTimeout()) // absent or 0s: disabled
	if hr.GetTimeout() == nil {
		rt.Defaults = append(rt.Defaults, "timeout")
	}
	if hr.GetFault() != nil {
		rt.Unsupported = append(rt.Unsupported, "fault")
	}
	if hr.GetMirror() != nil || len(hr.GetMirrors()) > 0 {
		rt.Unsupported = append(rt.Unsupported, "mirror")
	}
	rp := hr.GetRetries()
	rt.Backoff = IstioDefaultBackoff
	if rp == nil {
		// Istio's default retry policy.
		rt.Tries, rt.RetryOn = IstioDefaultAttempts+1, IstioDefaultRetryOn()
		rt.Defaults = append(rt.Defaults, "retries")
		return
	}
	if rp.GetAttempts() <= 0 {
		rt.Tries, rt.Backoff = 1, 0 // retries explicitly off
		if child(child(node, "retries"), "attempts") == nil {
			rt.Defaults = append(rt.Defaults, "retries.attempts")
		}
		return
	}
	rt.Tries = int(rp.GetAttempts()) + 1 // attempts counts retries
	rt.PerTryTimeout = durationOf(rp.GetPerTryTimeout())
	if rp.GetPerTryTimeout() == nil {
		rt.Defaults = append(rt.Defaults, "retries.perTryTimeout")
	}
	if rp.GetBackoff() != nil {
		rt.Backoff = durationOf(rp.GetBackoff())
	} else {
		rt.Defaults = append(rt.Defaults, "retries.backoff")
	}
	if rp.GetRetryRemoteLocalities().GetValue() {
		rt.Unsupported = append(rt.Unsupported, "retries.retryRemoteLocalities")
	}
	if rp.GetRetryIgnorePreviousHosts() != nil {
		rt.Unsupported = append(rt.Unsupported, "retries.retryIgnorePreviousHosts")
	}
	if strings.TrimSpace(rp.GetRetryOn()) == "" {
		rt.RetryOn = IstioDefaultRetryOn()
		rt.Defaults = append(rt.Defaults, "retries.retryOn")
		return
	}
	known := policyenvoy.RetryOnConditions()
	for _, c := range strings.Split(rp.GetRetryOn(), ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		rt.RetryOn = append(rt.RetryOn, c)
		if code, err := strconv.Atoi(c); err == nil && http.StatusText(code) != "" {
			continue
		}
		if !slices.Contains(known, c) {
			line, col := rt.Position("retries.retryOn")
			fix := suggest(c, known)
			r.set.Notes = append(r.set.Notes, Note{File: rt.File, Line: line, Column: col,
				Msg: fmt.Sprintf("retries.retryOn %q is neither a condition Envoy knows nor an HTTP status: Envoy never retries on it%s", c, fix)})
		}
		switch c {
		case "retriable-headers", "envoy-ratelimited", "http3-post-connect-failure":
			rt.Unsupported = append(rt.Unsupported, "retries.retryOn "+c)
		}
	}
}

// destinationRule reads a DestinationRule: its outlier detection, connection pool
// and retry budget, for the Service its host names.
func (r *reader) destinationRule(w *walker, root *yaml3.Node) {
	var obj istiov1.DestinationRule
	if !r.decodeObject(w, root, &obj) {
		return
	}
	spec := &obj.Spec
	p := &Policy{Source: SourceIstio, Kind: "DestinationRule", Namespace: obj.Namespace, Name: obj.Name, File: w.file,
		Line: root.Line, Column: root.Column, pos: docPositions(root, "")}
	if h := spec.GetHost(); h != "" {
		p.Targets = []string{h}
		p.services = []string{fqdn(h, obj.Namespace)}
	}
	tp := spec.GetTrafficPolicy()
	if od := tp.GetOutlierDetection(); od != nil {
		b := &Breaker{Consecutive5xxErrors: 5, Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionPercent: 10}
		const at = "spec.trafficPolicy.outlierDetection"
		if v := od.GetConsecutive_5XxErrors(); v != nil {
			b.Consecutive5xxErrors = int(v.GetValue())
		} else {
			p.Defaults = append(p.Defaults, at+".consecutive5xxErrors")
		}
		b.ConsecutiveGatewayErrors = int(od.GetConsecutiveGatewayErrors().GetValue())
		if od.GetInterval() != nil {
			b.Interval = durationOf(od.GetInterval())
		} else {
			p.Defaults = append(p.Defaults, at+".interval")
		}
		if od.GetBaseEjectionTime() != nil {
			b.BaseEjectionTime = durationOf(od.GetBaseEjectionTime())
		} else {
			p.Defaults = append(p.Defaults, at+".baseEjectionTime")
		}
		if od.GetMaxEjectionPercent() != 0 {
			b.MaxEjectionPercent = int(od.GetMaxEjectionPercent())
		} else {
			p.Defaults = append(p.Defaults, at+".maxEjectionPercent")
		}
		//lint:ignore SA1019 a manifest may still set the deprecated field; it is reported, not read
		if od.GetConsecutiveErrors() != 0 {
			p.Unsupported = append(p.Unsupported, at+".consecutiveErrors (deprecated)")
		}
		if od.GetSplitExternalLocalOriginErrors() {
			p.Unsupported = append(p.Unsupported, at+".splitExternalLocalOriginErrors")
		}
		if od.GetFailurePercentageThreshold() != nil {
			p.Unsupported = append(p.Unsupported, at+".failurePercentageThreshold")
		}
		p.Breaker = b
	}
	if cp := tp.GetConnectionPool(); cp != nil {
		p.Bulkhead = &Bulkhead{MaxConnections: int(cp.GetTcp().GetMaxConnections()), MaxPendingRequests: int(cp.GetHttp().GetHttp1MaxPendingRequests()),
			MaxRequests: int(cp.GetHttp().GetHttp2MaxRequests()), MaxRetries: int(cp.GetHttp().GetMaxRetries()),
			ConnectTimeout: 10 * time.Second}
		if cp.GetTcp().GetConnectTimeout() != nil {
			p.Bulkhead.ConnectTimeout = durationOf(cp.GetTcp().GetConnectTimeout())
		}
	}
	if rb := tp.GetRetryBudget(); rb != nil {
		b := &Budget{Percent: 20, MinRetryConcurrency: 3}
		const at = "spec.trafficPolicy.retryBudget"
		if rb.GetPercent() != nil {
			b.Percent = rb.GetPercent().GetValue()
			if b.Percent < 0 || b.Percent > 100 {
				line, col := p.Position(at + ".percent")
				r.ps.add(&ConfigError{File: w.file, Line: line, Column: col, Path: at + ".percent",
					Msg: fmt.Sprintf("%v is not a percentage: want 0 to 100", b.Percent)})
			}
		} else {
			p.Defaults = append(p.Defaults, at+".percent")
		}
		if child(child(child(child(root, "spec"), "trafficPolicy"), "retryBudget"), "minRetryConcurrency") != nil {
			b.MinRetryConcurrency = int(rb.GetMinRetryConcurrency())
		} else {
			p.Defaults = append(p.Defaults, at+".minRetryConcurrency")
		}
		b.Interval = durationOf(rb.GetBudgetInterval())
		p.Budget = p.budgetAt(b, at)
	}
	if len(tp.GetPortLevelSettings()) > 0 {
		p.Unsupported = append(p.Unsupported, "spec.trafficPolicy.portLevelSettings")
	}
	for i, s := range spec.GetSubsets() {
		if s.GetTrafficPolicy() != nil {
			p.Unsupported = append(p.Unsupported, fmt.Sprintf("spec.subsets[%d].trafficPolicy", i))
		}
	}
	r.set.Policies = append(r.set.Policies, p)
}
