package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyk8s"
)

// formatK8s is a source of Kubernetes manifests: Gateway API, Istio and Linkerd
// routes and policies (policyk8s).
const formatK8s = "k8s"

// loadK8s reads -k8s, a file or a directory of manifests ("-" is standard input),
// into a source: the routes as policyk8s reads them, and imported into the model.
func loadK8s(stdin io.Reader, path string) (*source, error) {
	src := &source{format: formatK8s, file: path}
	if path == "-" {
		name, data, err := read(stdin, path)
		if err != nil {
			return nil, err
		}
		src.file, src.data = name, data
		src.k8s, src.err = policyk8s.Parse(name, data)
	} else {
		src.k8s, src.err = policyk8s.Load(path)
		if src.err != nil && !errors.Is(src.err, policyk8s.ErrInvalid) {
			return nil, src.err // a file that cannot be read
		}
	}
	if src.err == nil && len(src.k8s.Routes) > 0 { // a file of policies alone has no stack
		src.config, src.err = policyk8s.Import(src.file, src.k8s).Build(config.Options{})
	}
	return src, nil
}

// k8sWhere names a route rule as its source does: `VirtualService shop/orders http[0]`.
func k8sWhere(r *policyk8s.Route) string {
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	switch r.Kind {
	case "VirtualService":
		return fmt.Sprintf("%s %s http[%d]", r.Kind, name, r.Rule)
	case "Service": // Linkerd's annotations on a Service: all traffic to it
		return fmt.Sprintf("%s %s", r.Kind, name)
	}
	return fmt.Sprintf("%s %s rules[%d]", r.Kind, name, r.Rule)
}

// k8sRetryField is the field that says how a route rule retries, as its source
// spells it.
func k8sRetryField(r *policyk8s.Route) string {
	switch {
	case r.Source == policyk8s.SourceLinkerd:
		return "retry.linkerd.io/limit"
	case r.Source == policyk8s.SourceIstio:
		return "retries"
	}
	return "retry"
}

// k8sDrop says how to stop a route rule retrying, in its source's words.
func k8sDrop(r *policyk8s.Route) string {
	w := k8sWhere(r)
	switch r.Source {
	case policyk8s.SourceIstio:
		return fmt.Sprintf("set retries: {attempts: 0} on %s (without retries, Istio retries twice)", w)
	case policyk8s.SourceLinkerd:
		if r.InheritedFrom != "" {
			return fmt.Sprintf(`set retry.linkerd.io/limit: "0" on %s, or drop the retry annotations of %s`, w, r.InheritedFrom)
		}
		return fmt.Sprintf("drop the retry.linkerd.io annotations of %s %s/%s", r.Kind, r.Namespace, r.Name)
	}
	return fmt.Sprintf("remove retry from %s", w)
}

// k8sLayers are the layers a route rule stands at: a gateway's when it attaches to
// a Gateway (an Istio VirtualService's gateways), the sidecar's when it attaches
// to a Service (the Gateway API's mesh routes, Linkerd's) or to Istio's mesh.
func k8sLayers(r *policyk8s.Route) []int {
	var gateway, sidecar bool
	for _, p := range r.ParentRefs {
		switch {
		case p == "mesh" || strings.HasPrefix(p, "Service/"):
			sidecar = true
		case r.Kind == "VirtualService" || !strings.Contains(p, "/") || isGatewayRef(p):
			gateway = true
		}
	}
	if !gateway && !sidecar {
		sidecar = true // an Istio VirtualService applies to the mesh when it names no gateway
	}
	var out []int
	if gateway {
		out = append(out, layerGateway)
	}
	if sidecar {
		out = append(out, layerSidecar)
	}
	return out
}

// isGatewayRef reports whether a Gateway API parentRef, "namespace/name" or
// "Kind/name", names a Gateway: a kind is capitalised, a namespace is not.
func isGatewayRef(p string) bool {
	k, _, _ := strings.Cut(p, "/")
	return k == "Gateway" || k == "" || k[0] < 'A' || k[0] > 'Z'
}

// k8sHosts are where a route rule sends at a layer: a gateway's, to its backends;
// a sidecar's, for the hosts it serves (Istio's hosts, the Service it attaches to).
func k8sHosts(r *policyk8s.Route, layer int) []string {
	if layer == layerGateway {
		return qualify(r.Backends, r.Namespace)
	}
	var hosts []string
	for _, p := range r.ParentRefs {
		if s, ok := strings.CutPrefix(p, "Service/"); ok {
			if ns, name, ok := strings.Cut(s, "/"); ok { // "Service/namespace/name"
				s = name + "." + ns
			}
			hosts = append(hosts, s)
		}
	}
	if r.Kind == "VirtualService" {
		hosts = append(hosts, r.Hosts...)
	}
	if len(hosts) == 0 {
		hosts = r.Backends
	}
	return qualify(hosts, r.Namespace)
}

// qualify writes a Service's short name with the route's namespace, as Kubernetes
// resolves it; other hosts stay as written.
func qualify(hosts []string, ns string) []string {
	if hosts == nil {
		return nil
	}
	out := make([]string, len(hosts))
	for i, h := range hosts {
		if ns != "" && !strings.Contains(h, ".") && h != "*" {
			h += "." + ns
		}
		out[i] = h
	}
	return out
}

// k8sPaths are the paths a route rule matches; nil for every path.
func k8sPaths(r *policyk8s.Route) (paths []pathMatch, vague bool) {
	for _, m := range r.Matches {
		switch {
		case m.Service != "" || m.GRPCMethod != "":
			if m.Service == "" {
				return nil, true
			}
			if m.GRPCMethod == "" {
				paths = append(paths, pathMatch{path: "/" + m.Service + "/", prefix: true})
			} else {
				paths = append(paths, pathMatch{path: "/" + m.Service + "/" + m.GRPCMethod})
			}
		case m.Path == "":
			return nil, false
		case strings.EqualFold(m.PathType, "Exact"):
			paths = append(paths, pathMatch{path: m.Path})
		case strings.EqualFold(m.PathType, "PathPrefix") || strings.EqualFold(m.PathType, "prefix"):
			paths = append(paths, pathMatch{path: m.Path, prefix: true})
		default: // a regex: any path, perhaps
			return nil, true
		}
	}
	return paths, false
}

// k8sHops are a set's route rules as hops, one per layer each stands at.
func k8sHops(set *policyk8s.Set) []hop {
	var hops []hop
	for _, r := range set.Routes {
		field := k8sRetryField(r)
		line, col := r.Position(field)
		tries := r.Tries
		if tries == 0 { // left to the implementation: it retries, how often is unknown
			tries = 2
		}
		paths, vague := k8sPaths(r)
		for _, layer := range k8sLayers(r) {
			h := hop{layer: layer, source: r.Source, what: k8sWhere(r), field: field,
				pos:   config.Pos{File: r.File, Line: line, Column: col},
				hosts: k8sHosts(r, layer), paths: paths, vague: vague, tries: tries,
				perTry: r.PerTryTimeout, worst: r.WorstCase(), drop: k8sDrop(r)}
			h.wait = r.Timeout
			if h.wait == 0 {
				h.wait = h.worst
			}
			hops = append(hops, h)
		}
	}
	return hops
}

// k8sRoutes lints each route rule of a set in its source's words: retries unbounded
// in time, a worst case above the threshold, tries that do not fit, no retry
// budget, 500 retried, and retries on by default.
func (l *linter) k8sRoutes(src *source) {
	for _, n := range src.k8s.Notes {
		l.add("skipped", n.File, n.Line, n.Column, "", "", "give lint the routes and policies of the call path; other documents need no change", "%s", n.Msg)
	}
	for _, r := range src.k8s.Routes {
		l.k8sRoute(r)
	}
	if src.config == nil {
		return
	}
	for _, n := range src.config.Notes() {
		where := n.Stack
		if o, ok := src.config.Origin(n.Stack); ok {
			if r, ok := o.Source.(*policyk8s.Route); ok {
				where = k8sWhere(r)
			}
		}
		if n.Reason == config.NoteNotCarried || n.Reason == config.NoteUnknown {
			l.add("not-honoured", n.Pos.File, n.Pos.Line, n.Pos.Column, where, n.Field,
				"keep it in the mesh, or express it in the application", "Backstop's stack for it does not carry %s", n.Msg)
		}
	}
}

func (l *linter) k8sRoute(r *policyk8s.Route) {
	where, retryField := k8sWhere(r), k8sRetryField(r)
	add := func(id, field, fix, format string, args ...any) {
		line, col := r.Position(field)
		l.add(id, r.File, line, col, where, field, fix, format, args...)
	}
	timeoutField, timeoutFix := "timeouts.request", "set timeouts.request, e.g. 10s, that the caller can wait"
	perTryField := "timeouts.backendRequest"
	budgetFix := fmt.Sprintf("attach an XBackendTrafficPolicy with retryConstraint (budget percent: 20, interval: 10s) to Service %s", strings.Join(r.Backends, ", "))
	switch r.Source {
	case policyk8s.SourceIstio:
		timeoutField, timeoutFix, perTryField = "timeout", "set timeout, e.g. 10s, that the caller can wait", "retries.perTryTimeout"
		budgetFix = fmt.Sprintf("give a DestinationRule for %s a retry budget (trafficPolicy.retryBudget, e.g. percent: 20), or let the app own the retries with its budget", strings.Join(r.Backends, ", "))
	case policyk8s.SourceLinkerd:
		timeoutField, timeoutFix, perTryField = "timeout.linkerd.io/request", `set timeout.linkerd.io/request, e.g. "10s", that the caller can wait`, "retry.linkerd.io/timeout"
		budgetFix = `Linkerd's route retries have no budget: keep retry.linkerd.io/limit at 1, or let the app own the retries with its budget`
	}
	if r.Source == policyk8s.SourceIstio && slices.Contains(r.Defaults, "retries") {
		add("default-retries", "", "set retries: {attempts: 0} where another layer owns the retries, or write the retries meant",
			"no retries set, so Istio's default applies: %d retries (%d tries) on %s", policyk8s.IstioDefaultAttempts, r.Tries, strings.Join(r.RetryOn, ","))
	}
	if r.Tries < 2 && r.Tries != 0 {
		return
	}
	worst := r.WorstCase()
	if worst == 0 {
		add("no-timeout", timeoutField, timeoutFix, "%s with no timeout and no per-try timeout: one hung try holds the request for ever",
			triesText(max(r.Tries, 2)))
	}
	if worst > l.maxWorstCase {
		add("worst-case", timeoutField, fmt.Sprintf("lower %s to %v or less", timeoutField, l.maxWorstCase),
			"the worst case is %v (every try timing out, every wait its longest), above %v: callers give up long before, and the tries still load the service",
			worst, l.maxWorstCase)
	}
	if r.Timeout > 0 && r.PerTryTimeout > 0 {
		tries := max(r.Tries, 2)
		need := time.Duration(tries)*r.PerTryTimeout + time.Duration(tries-1)*r.Backoff
		switch {
		case r.PerTryTimeout >= r.Timeout:
			add("attempts-fit", perTryField, fmt.Sprintf("lower %s below %s %v", perTryField, timeoutField, r.Timeout),
				"%s %v is not below %s %v: the first try that hangs ends the request, and no retry runs", perTryField, r.PerTryTimeout, timeoutField, r.Timeout)
		case need > r.Timeout:
			fit := int((r.Timeout + r.Backoff) / (r.PerTryTimeout + r.Backoff))
			add("attempts-fit", perTryField, fmt.Sprintf("raise %s to %v, or lower the tries to %d", timeoutField, need, max(fit, 1)),
				"%d tries of %s %v and their back-off do not fit in %s %v: when tries time out, only %d of %d run",
				tries, perTryField, r.PerTryTimeout, timeoutField, r.Timeout, fit, tries)
		}
	}
	if r.Source == policyk8s.SourceIstio && r.PerTryTimeout == 0 && r.Timeout > 0 && r.Backoff > 0 && !slices.Contains(r.Defaults, "retries.backoff") {
		// Istio's own example: attempts 3, backoff 2s and timeout 3s retry once.
		tries := max(r.Tries, 2)
		if starts := 1 + int((r.Timeout-1)/r.Backoff); starts < tries {
			add("attempts-fit", "retries.backoff", fmt.Sprintf("raise timeout above %v, or lower retries.backoff or retries.attempts", time.Duration(tries-1)*r.Backoff),
				"retries.backoff %v between tries: within timeout %v only %d of %d tries start", r.Backoff, r.Timeout, starts, tries)
		}
	}
	if r.Budget == nil {
		add("no-budget", retryField, budgetFix, "retries with no retry budget: in an outage every request makes all %s", triesText(max(r.Tries, 2)))
	}
	for _, c := range r.RetryOn {
		if c == "5xx" || c == "500" || strings.HasPrefix(c, "500-") || c == "internal" || c == "unknown" {
			add("retry-500", retryField, "retry 502, 503 and 504 (gateway-error) instead, or the codes meant",
				"%s retries 500 (or INTERNAL, UNKNOWN), which usually reports a bug a retry hits again", c)
			break
		}
	}
}

// k8sView is a route rule explained in its source's words.
type k8sView struct {
	Config string `json:"config"` // "k8s-route"
	policyk8s.Explanation
	Source           string   `json:"source"`
	File             string   `json:"file"`
	Line             int      `json:"line"`
	Column           int      `json:"column"`
	WorstCaseSeconds *float64 `json:"worst_case_seconds"` // null: unbounded
}

func (v k8sView) text(w io.Writer) {
	for _, line := range v.Lines {
		fmt.Fprintln(w, line)
	}
}

// k8sViews explains every route rule of a set.
func k8sViews(set *policyk8s.Set) []any {
	var views []any
	for _, r := range set.Routes {
		v := k8sView{Config: "k8s-route", Explanation: r.Explain(), Source: r.Source, File: r.File, Line: r.Line, Column: r.Column}
		if wc := r.WorstCase(); wc > 0 {
			v.WorstCaseSeconds = seconds(wc)
		}
		views = append(views, v)
	}
	return views
}
