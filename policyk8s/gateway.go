package policyk8s

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayx "sigs.k8s.io/gateway-api/apisx/v1alpha1"
)

// decodeObject checks a document against obj's type and decodes it into obj. It
// reports false, the problems reported, if the document is not one. status is
// read as any value: a controller writes it, not the user.
func (r *reader) decodeObject(w *walker, root *yaml3.Node, obj any) bool {
	before := len(r.ps.errs)
	t := reflect.TypeOf(obj).Elem()
	var out bytes.Buffer
	out.WriteByte('{')
	si := structOf(t)
	keys, vals := w.pairs(root, nil)
	first := true
	for i, k := range keys {
		f, ok := si.fields[k.Value]
		if !ok {
			w.fail(k, []pathElem{key(k.Value)}, "unknown field %q of %s%s", k.Value, t.Name(), suggest(k.Value, si.names))
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		writeString(&out, f.name)
		out.WriteByte(':')
		if k.Value == "status" {
			w.generic(vals[i], []pathElem{key("status")}, &out)
			continue
		}
		w.value(vals[i], f.typ, []pathElem{key(k.Value)}, &out)
	}
	out.WriteByte('}')
	if w.stop {
		return false
	}
	if err := json.Unmarshal(out.Bytes(), obj); err != nil {
		if len(r.ps.errs) == before {
			r.fail(w.file, root, nil, "as a %s: %v", t.Name(), err)
		}
		return false
	}
	// With problems reported, the rest is still read for its own problems.
	return true
}

// docPositions records where the document's metadata and spec fields other than
// the rules (rulesKey) are written.
func docPositions(root *yaml3.Node, rulesKey string) map[string]pos {
	into := map[string]pos{}
	budget := 2000
	if k := keyOf(root, "metadata"); k != nil {
		into["metadata"] = pos{k.Line, k.Column}
		record(child(root, "metadata"), []pathElem{key("metadata")}, into, &budget)
	}
	spec := child(root, "spec")
	if k := keyOf(root, "spec"); k != nil {
		into["spec"] = pos{k.Line, k.Column}
	}
	if spec != nil && spec.Kind == yaml3.MappingNode {
		for i := 0; i+1 < len(spec.Content); i += 2 {
			k := spec.Content[i]
			if k.Value == rulesKey {
				into["spec."+rulesKey] = pos{k.Line, k.Column}
				continue
			}
			p := []pathElem{key("spec"), key(k.Value)}
			into[formatPath(p)] = pos{k.Line, k.Column}
			record(spec.Content[i+1], p, into, &budget)
		}
	}
	return into
}

// gatewayDuration matches GEP-2257's duration: 1 to 4 parts of up to 5 digits and a
// unit h, m, s or ms.
var gatewayDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// parseGatewayDuration reads a Gateway API Duration (GEP-2257).
func parseGatewayDuration(s string) (time.Duration, error) {
	if !gatewayDuration.MatchString(s) {
		return 0, fmt.Errorf("%q is not a Gateway API duration (GEP-2257): want 1 to 4 parts of a whole number and a unit h, m, s or ms, such as \"1s\" or \"1m30s\"", s)
	}
	return time.ParseDuration(s)
}

// The patterns the GRPCRoute CRD holds an exact method match's names to.
var (
	grpcService = regexp.MustCompile(`^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`)
	grpcMethod  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// gatewayRoute reads an HTTPRoute or GRPCRoute: one Route per rule.
func (r *reader) gatewayRoute(w *walker, root *yaml3.Node, kind string) {
	var (
		meta    metaOf
		spec    gatewayv1.CommonRouteSpec
		hosts   []gatewayv1.Hostname
		nrules  int
		httpObj gatewayv1.HTTPRoute
		grpcObj gatewayv1.GRPCRoute
	)
	if kind == "HTTPRoute" {
		if !r.decodeObject(w, root, &httpObj) {
			return
		}
		meta = metaOf{httpObj.Namespace, httpObj.Name, httpObj.Annotations}
		spec, hosts, nrules = httpObj.Spec.CommonRouteSpec, httpObj.Spec.Hostnames, len(httpObj.Spec.Rules)
	} else {
		if !r.decodeObject(w, root, &grpcObj) {
			return
		}
		meta = metaOf{grpcObj.Namespace, grpcObj.Name, grpcObj.Annotations}
		spec, hosts, nrules = grpcObj.Spec.CommonRouteSpec, grpcObj.Spec.Hostnames, len(grpcObj.Spec.Rules)
	}
	docPos := docPositions(root, "rules")
	rules := child(child(root, "spec"), "rules")
	var parents, parentServices []string
	for _, p := range spec.ParentRefs {
		ref := string(p.Name)
		if p.Namespace != nil && *p.Namespace != "" {
			ref = string(*p.Namespace) + "/" + ref
		}
		k := "Gateway"
		if p.Kind != nil {
			k = string(*p.Kind)
		}
		if k != "Gateway" {
			ref = k + "/" + ref
		}
		parents = append(parents, ref)
		if k == "Service" {
			ns := meta.namespace
			if p.Namespace != nil && *p.Namespace != "" {
				ns = string(*p.Namespace)
			}
			parentServices = append(parentServices, fqdn(string(p.Name), ns))
		}
	}
	var hostnames []string
	for _, h := range hosts {
		hostnames = append(hostnames, string(h))
	}
	for i := range nrules {
		node := item(rules, i)
		rt := &Route{Source: SourceGatewayAPI, Kind: kind, Namespace: meta.namespace, Name: meta.name, Rule: i,
			File: w.file, Hosts: hostnames, ParentRefs: parents, parents: parentServices, grpc: kind == "GRPCRoute",
			docPos: docPos, pos: map[string]pos{}, Tries: 1}
		if node != nil {
			rt.Line, rt.Column = node.Line, node.Column
			budget := 2000
			record(node, nil, rt.pos, &budget)
		}
		at := []pathElem{key("spec"), key("rules"), index(i)}
		var ruleTimeouts *gatewayv1.HTTPRouteTimeouts
		if kind == "HTTPRoute" {
			rule := httpObj.Spec.Rules[i]
			ruleTimeouts = rule.Timeouts
			r.httpRule(w, rt, rule, node, at, meta.namespace)
		} else {
			r.grpcRule(w, rt, grpcObj.Spec.Rules[i], node, at, meta.namespace)
		}
		lk := linkerdKeys(meta.annotations)
		if len(lk) > 0 {
			r.linkerd(w, rt, meta.annotations, nil, root, ruleTimeouts)
		}
		if len(parentServices) > 0 && (!hasAny(meta.annotations, linkerdRetry) || !hasAny(meta.annotations, linkerdTimeout)) {
			// Linkerd's annotations on the parent Service may apply: read them once
			// every file is read.
			rt.build = func(rt *Route, ann map[string]string, p *Policy) {
				r.linkerd(nil, rt, ann, p, nil, ruleTimeouts)
			}
		}
		r.set.Routes = append(r.set.Routes, rt)
	}
}

// metaOf is the metadata a route keeps.
type metaOf struct {
	namespace, name string
	annotations     map[string]string
}

// httpRule reads one HTTPRoute rule into rt.
func (r *reader) httpRule(w *walker, rt *Route, rule gatewayv1.HTTPRouteRule, node *yaml3.Node, at []pathElem, ns string) {
	for _, b := range rule.BackendRefs {
		r.backend(rt, b.BackendRef, ns)
	}
	for j, f := range rule.Filters {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestMirror, gatewayv1.HTTPRouteFilterExtensionRef:
			rt.Unsupported = append(rt.Unsupported, fmt.Sprintf("filters[%d] %s", j, f.Type))
		}
	}
	for _, m := range rule.Matches {
		mm := Match{PathType: "PathPrefix", Path: "/"}
		if m.Path != nil {
			if m.Path.Type != nil {
				mm.PathType = string(*m.Path.Type)
			}
			if m.Path.Value != nil {
				mm.Path = *m.Path.Value
			}
		}
		if m.Method != nil {
			mm.Method = string(*m.Method)
		}
		if len(m.Headers) > 0 {
			mm.Others = append(mm.Others, "headers")
		}
		if len(m.QueryParams) > 0 {
			mm.Others = append(mm.Others, "queryParams")
		}
		rt.Matches = append(rt.Matches, mm)
	}
	if len(rt.Matches) == 0 {
		rt.Matches = []Match{{PathType: "PathPrefix", Path: "/"}}
	}
	if t := rule.Timeouts; t != nil {
		var req, backend time.Duration
		reqSet, backendSet := false, false
		if t.Request != nil {
			d, err := parseGatewayDuration(string(*t.Request))
			if err != nil {
				r.fail(w.file, child(child(node, "timeouts"), "request"), with(at, key("timeouts"), key("request")), "%v", err)
			}
			req, reqSet = d, true
		}
		if t.BackendRequest != nil {
			d, err := parseGatewayDuration(string(*t.BackendRequest))
			if err != nil {
				r.fail(w.file, child(child(node, "timeouts"), "backendRequest"), with(at, key("timeouts"), key("backendRequest")), "%v", err)
			}
			backend, backendSet = d, true
		}
		if reqSet && backendSet && req > 0 && backend > req { // 0s turns backendRequest off: allowed
			r.fail(w.file, child(child(node, "timeouts"), "backendRequest"), with(at, key("timeouts"), key("backendRequest")),
				"%s is longer than timeouts.request %s; the Gateway API refuses it (backendRequest must be no more than request): lower it, or raise request",
				*t.BackendRequest, *t.Request)
		}
		rt.Timeout, rt.PerTryTimeout = req, backend
		if !reqSet {
			rt.Defaults = append(rt.Defaults, "timeouts.request")
		}
		if !backendSet {
			rt.Defaults = append(rt.Defaults, "timeouts.backendRequest")
		}
	} else {
		rt.Defaults = append(rt.Defaults, "timeouts")
	}
	rp := rule.Retry
	if rp == nil {
		rt.Defaults = append(rt.Defaults, "retry")
		return
	}
	retry := child(node, "retry")
	for j, c := range rp.Codes {
		if c < 400 || c > 599 {
			r.fail(w.file, item(child(retry, "codes"), j), with(at, key("retry"), key("codes"), index(j)),
				"%d is not a status the Gateway API retries: want 400 to 599 (500, 502, 503 and 504 every implementation supports)", c)
		}
		rt.RetryOn = append(rt.RetryOn, strconv.Itoa(int(c)))
	}
	switch {
	case rp.Attempts == nil:
		rt.Tries = 0 // implementation-specific
		rt.Defaults = append(rt.Defaults, "retry.attempts")
	case *rp.Attempts < 1:
		r.fail(w.file, child(retry, "attempts"), with(at, key("retry"), key("attempts")),
			"%d is below the Gateway API's minimum 1: remove retry for no retries", *rp.Attempts)
	default:
		rt.Tries = *rp.Attempts + 1 // attempts counts retries
	}
	if len(rp.Codes) == 0 {
		rt.Defaults = append(rt.Defaults, "retry.codes")
	}
	if rp.Backoff != nil {
		d, err := parseGatewayDuration(string(*rp.Backoff))
		if err != nil {
			r.fail(w.file, child(retry, "backoff"), with(at, key("retry"), key("backoff")), "%v", err)
		}
		rt.Backoff = d
	} else {
		rt.Defaults = append(rt.Defaults, "retry.backoff")
	}
}

// backend adds a backendRef to rt's backends.
func (r *reader) backend(rt *Route, b gatewayv1.BackendRef, ns string) {
	name := string(b.Name)
	kind := "Service"
	if b.Kind != nil {
		kind = string(*b.Kind)
	}
	bns := ns
	if b.Namespace != nil && *b.Namespace != "" {
		bns = string(*b.Namespace)
		name += "." + bns
	}
	if kind != "Service" {
		name = kind + "/" + name
	} else {
		rt.services = append(rt.services, fqdn(string(b.Name), bns))
	}
	rt.Backends = append(rt.Backends, name)
}

// grpcRule reads one GRPCRoute rule into rt. The Gateway API's GRPCRoute has no
// retry or timeouts field.
func (r *reader) grpcRule(w *walker, rt *Route, rule gatewayv1.GRPCRouteRule, node *yaml3.Node, at []pathElem, ns string) {
	for _, b := range rule.BackendRefs {
		r.backend(rt, b.BackendRef, ns)
	}
	for j, f := range rule.Filters {
		switch f.Type {
		case gatewayv1.GRPCRouteFilterRequestMirror, gatewayv1.GRPCRouteFilterExtensionRef:
			rt.Unsupported = append(rt.Unsupported, fmt.Sprintf("filters[%d] %s", j, f.Type))
		}
	}
	for j, m := range rule.Matches {
		mm := Match{}
		if m.Method != nil {
			// The CRD's patterns, for an exact match.
			mn := child(item(child(node, "matches"), j), "method")
			mat := with(at, key("matches"), index(j), key("method"))
			exact := m.Method.Type == nil || *m.Method.Type == gatewayv1.GRPCMethodMatchExact
			if s := m.Method.Service; exact && s != nil && !grpcService.MatchString(*s) {
				r.fail(w.file, child(mn, "service"), with(mat, key("service")), "%q is not a gRPC service name: want one such as \"shop.v1.Inventory\"", *s)
			}
			if s := m.Method.Method; exact && s != nil && !grpcMethod.MatchString(*s) {
				r.fail(w.file, child(mn, "method"), with(mat, key("method")), "%q is not a gRPC method name: want one such as \"Reserve\"", *s)
			}
			mm.PathType = "Exact"
			if m.Method.Type != nil {
				mm.PathType = string(*m.Method.Type)
			}
			if m.Method.Service != nil {
				mm.Service = *m.Method.Service
			}
			if m.Method.Method != nil {
				mm.GRPCMethod = *m.Method.Method
			}
		}
		if len(m.Headers) > 0 {
			mm.Others = append(mm.Others, "headers")
		}
		rt.Matches = append(rt.Matches, mm)
	}
	if len(rt.Matches) == 0 {
		rt.Matches = []Match{{}}
	}
	rt.Defaults = append(rt.Defaults, "retry", "timeouts")
}

// backendTrafficPolicy reads an XBackendTrafficPolicy: its retry budget, for the
// Services its targetRefs name.
func (r *reader) backendTrafficPolicy(w *walker, root *yaml3.Node, kind string) {
	var obj gatewayx.XBackendTrafficPolicy
	if !r.decodeObject(w, root, &obj) {
		return
	}
	p := &Policy{Source: SourceGatewayAPI, Kind: kind, Namespace: obj.Namespace, Name: obj.Name, File: w.file,
		Line: root.Line, Column: root.Column, pos: docPositions(root, "")}
	for _, t := range obj.Spec.TargetRefs {
		p.Targets = append(p.Targets, string(t.Kind)+"/"+string(t.Name))
		if t.Kind == "Service" && (t.Group == "" || t.Group == "core") {
			p.services = append(p.services, fqdn(string(t.Name), obj.Namespace))
		}
	}
	rc := obj.Spec.RetryConstraint
	at := []pathElem{key("spec"), key("retryConstraint")}
	if rc != nil {
		// The CRD's defaults: budget {percent: 20, interval: 10s}, minRetryRate
		// {count: 10, interval: 1s}.
		b := &Budget{Percent: 20, Interval: 10 * time.Second}
		count, per := 10, time.Second
		if rc.Budget == nil {
			p.Defaults = append(p.Defaults, "spec.retryConstraint.budget")
		} else {
			if rc.Budget.Percent != nil {
				if *rc.Budget.Percent < 0 || *rc.Budget.Percent > 100 {
					r.fail(w.file, child(child(child(child(root, "spec"), "retryConstraint"), "budget"), "percent"),
						with(at, key("budget"), key("percent")), "%d is not a percentage: want 0 to 100", *rc.Budget.Percent)
				}
				b.Percent = float64(*rc.Budget.Percent)
			} else {
				p.Defaults = append(p.Defaults, "spec.retryConstraint.budget.percent")
			}
			if rc.Budget.Interval != nil {
				d, err := parseGatewayDuration(string(*rc.Budget.Interval))
				n := child(child(child(child(root, "spec"), "retryConstraint"), "budget"), "interval")
				switch {
				case err != nil:
					r.fail(w.file, n, with(at, key("budget"), key("interval")), "%v", err)
				case d < time.Second || d > time.Hour:
					r.fail(w.file, n, with(at, key("budget"), key("interval")), "%s: the Gateway API wants 1s to 1h", *rc.Budget.Interval)
				}
				b.Interval = d
			} else {
				p.Defaults = append(p.Defaults, "spec.retryConstraint.budget.interval")
			}
		}
		if rc.MinRetryRate == nil {
			p.Defaults = append(p.Defaults, "spec.retryConstraint.minRetryRate")
		} else {
			n := child(child(child(root, "spec"), "retryConstraint"), "minRetryRate")
			if rc.MinRetryRate.Count != nil {
				count = *rc.MinRetryRate.Count
				if count < 1 || count > 1000000 {
					r.fail(w.file, child(n, "count"), with(at, key("minRetryRate"), key("count")), "%d: the Gateway API wants 1 to 1000000", count)
				}
			}
			if rc.MinRetryRate.Interval != nil {
				d, err := parseGatewayDuration(string(*rc.MinRetryRate.Interval))
				switch {
				case err != nil:
					r.fail(w.file, child(n, "interval"), with(at, key("minRetryRate"), key("interval")), "%v", err)
				case d == 0 || d > time.Hour:
					r.fail(w.file, child(n, "interval"), with(at, key("minRetryRate"), key("interval")), "%s: the Gateway API wants more than 0s and at most 1h", *rc.MinRetryRate.Interval)
				default:
					per = d
				}
			}
		}
		b.MinRetryRate = float64(count) / per.Seconds()
		p.Budget = p.budgetAt(b, "spec.retryConstraint")
	}
	if obj.Spec.SessionPersistence != nil {
		p.Unsupported = append(p.Unsupported, "spec.sessionPersistence")
	}
	r.set.Policies = append(r.set.Policies, p)
}
