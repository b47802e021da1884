package policyk8s

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Linkerd's retry and timeout annotations (Linkerd 2.16 and later).
var (
	linkerdRetry   = []string{"retry.linkerd.io/http", "retry.linkerd.io/grpc", "retry.linkerd.io/limit", "retry.linkerd.io/timeout"}
	linkerdTimeout = []string{"timeout.linkerd.io/request", "timeout.linkerd.io/response", "timeout.linkerd.io/idle"}
)

// LinkerdBackoff is the shortest wait before a Linkerd retry: its policy controller
// gives every retry an exponential back-off from LinkerdBackoff to
// LinkerdMaxBackoff, fully jittered (linkerd2 policy-controller, outbound http.rs).
// Linkerd's documentation names no back-off.
const (
	LinkerdBackoff    = 25 * time.Millisecond
	LinkerdMaxBackoff = 250 * time.Millisecond
)

// LinkerdGRPCCodes are the gRPC status codes retry.linkerd.io/grpc takes.
func LinkerdGRPCCodes() []string {
	return []string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}
}

// linkerdKeys returns the annotations of ann under retry.linkerd.io/ or
// timeout.linkerd.io/, sorted.
func linkerdKeys(ann map[string]string) []string {
	var out []string
	for k := range ann {
		if strings.HasPrefix(k, "retry.linkerd.io/") || strings.HasPrefix(k, "timeout.linkerd.io/") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// hasAny reports whether ann has one of names.
func hasAny(ann map[string]string, names []string) bool {
	for _, n := range names {
		if _, ok := ann[n]; ok {
			return true
		}
	}
	return false
}

// linkerdRetrySpec is Linkerd's retry annotations as its policy controller reads
// them.
type linkerdRetrySpec struct {
	set      bool // any of limit, timeout or conditions is in effect
	limit    int  // retries; 1 when unset
	limitSet bool
	timeout  time.Duration
	http     []string // conditions as written
	grpc     []string
}

// annotationProblem places a problem with an annotation.
type annotationProblem func(name, format string, args ...any)

// readLinkerd reads Linkerd's annotations, reporting each problem to bad: an
// unknown annotation under Linkerd's prefixes, a value Linkerd's policy controller
// refuses.
func readLinkerd(ann map[string]string, bad annotationProblem) (rs linkerdRetrySpec, request, response, idle time.Duration) {
	known := append(slices.Clone(linkerdRetry), linkerdTimeout...)
	for _, k := range linkerdKeys(ann) {
		if !slices.Contains(known, k) {
			fix := suggest(k, known)
			if fix == "" {
				fix = "; want one of " + strings.Join(known, ", ")
			}
			bad(k, "%q is not an annotation Linkerd reads: it ignores it%s", k, fix)
		}
	}
	rs.limit = 1
	if v, ok := ann["retry.linkerd.io/limit"]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
		switch {
		case err != nil:
			bad("retry.linkerd.io/limit", "%q is not a retry limit: want a whole number from 0 to 65535, as a string (\"2\")", v)
		case n > 0: // Linkerd reads 0 as unset
			rs.limit, rs.limitSet, rs.set = int(n), true, true
		}
	}
	dur := func(name string) time.Duration {
		v, ok := ann[name]
		if !ok {
			return 0
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 || strings.TrimSpace(v) == "0" {
			bad(name, "%q is not a duration: want one with its unit, such as \"5s\" or \"200ms\"", v)
			return 0
		}
		return d
	}
	if rs.timeout = dur("retry.linkerd.io/timeout"); rs.timeout > 0 {
		rs.set = true
	}
	if v, ok := ann["retry.linkerd.io/http"]; ok {
		for _, c := range strings.Split(v, ",") {
			if !linkerdHTTPCondition(c) {
				bad("retry.linkerd.io/http", "%q is not a condition Linkerd retries: want a status (\"504\"), a range (\"500-504\"), gateway-error or 5xx", c)
			}
			rs.http = append(rs.http, c)
		}
		rs.set = true
	}
	if v, ok := ann["retry.linkerd.io/grpc"]; ok {
		for _, c := range strings.Split(v, ",") {
			if !slices.Contains(LinkerdGRPCCodes(), strings.ToLower(c)) {
				fix := suggest(c, LinkerdGRPCCodes())
				if fix == "" {
					fix = "; want one of " + strings.Join(LinkerdGRPCCodes(), ", ")
				}
				bad("retry.linkerd.io/grpc", "%q is not a gRPC status Linkerd retries%s", c, fix)
			}
			rs.grpc = append(rs.grpc, c)
		}
		rs.set = true
	}
	return rs, dur("timeout.linkerd.io/request"), dur("timeout.linkerd.io/response"), dur("timeout.linkerd.io/idle")
}

// linkerdHTTPCondition reports whether c is one of retry.linkerd.io/http's
// conditions: 5xx, gateway-error, a status 100–599 or a range of them.
func linkerdHTTPCondition(c string) bool {
	code := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 100 && n < 600
	}
	if strings.EqualFold(c, "5xx") || strings.EqualFold(c, "gateway-error") {
		return true
	}
	if _, ok := code(c); ok {
		return true
	}
	a, b, ok := strings.Cut(c, "-")
	lo, ok1 := code(a)
	hi, ok2 := code(b)
	return ok && ok1 && ok2 && lo <= hi
}

// linkerdStatuses returns the statuses retry.linkerd.io/http's conditions retry.
func linkerdStatuses(conds []string) []int {
	set := map[int]bool{}
	for _, c := range conds {
		lo, hi := 0, -1
		switch {
		case strings.EqualFold(c, "5xx"):
			lo, hi = 500, 599
		case strings.EqualFold(c, "gateway-error"):
			lo, hi = 502, 504
		default:
			a, b, ok := strings.Cut(c, "-")
			lo, _ = strconv.Atoi(a)
			hi = lo
			if ok {
				hi, _ = strconv.Atoi(b)
			}
		}
		for s := max(lo, 400); s <= min(hi, 599); s++ {
			set[s] = true
		}
	}
	var out []int
	for s := 400; s <= 599; s++ {
		if set[s] {
			out = append(out, s)
		}
	}
	return out
}

// linkerd applies Linkerd's annotations ann to rt: the route's own (from nil, root
// its document, problems reported), or those of its parent Service from, for the
// kinds (retry, timeout) the route has none of. timeouts is the rule's Gateway API
// timeouts.
func (r *reader) linkerd(w *walker, rt *Route, ann map[string]string, from *Policy, root *yaml3.Node, timeouts *gatewayv1.HTTPRouteTimeouts) {
	bad := func(name, format string, args ...any) {}
	if from == nil && w != nil {
		annotations := child(child(root, "metadata"), "annotations")
		bad = func(name, format string, args ...any) {
			n := keyOf(annotations, name)
			if v := child(annotations, name); v != nil && !strings.Contains(format, "not an annotation") {
				n = v
			}
			// One report per document, not per rule.
			if rt.Rule == 0 {
				r.fail(w.file, n, []pathElem{key("metadata"), key("annotations"), key(name)}, format, args...)
			}
		}
	}
	doRetry, doTimeout := true, true
	if from != nil {
		doRetry = !hasAny(rt.ownAnnotations(), linkerdRetry) && hasAny(ann, linkerdRetry)
		doTimeout = !hasAny(rt.ownAnnotations(), linkerdTimeout) && hasAny(ann, linkerdTimeout)
		if !doRetry && !doTimeout {
			return
		}
		rt.InheritedFrom = "Service " + from.Namespace + "/" + from.Name
		if from.Namespace == "" {
			rt.InheritedFrom = "Service " + from.Name
		}
	}
	rs, request, response, idle := readLinkerd(ann, bad)
	rt.Source = SourceLinkerd
	if doRetry && hasAny(ann, linkerdRetry) {
		if !slices.Contains(rt.Defaults, "retry") && rt.Kind != "Service" {
			rt.Unsupported = append(rt.Unsupported, "retry (Linkerd reads its retry.linkerd.io annotations instead)")
		}
		rt.Tries, rt.RetryOn, rt.Backoff = 1, nil, 0
		// Each kind of route reads its own conditions: retry.linkerd.io/http is not
		// valid on a GRPCRoute, nor /grpc on an HTTPRoute, and Linkerd ignores it.
		conds, condName, ignored, ignoredName, kind := rs.http, "retry.linkerd.io/http", rs.grpc, "retry.linkerd.io/grpc", "an HTTPRoute"
		if rt.grpc {
			conds, condName, ignored, ignoredName, kind = rs.grpc, "retry.linkerd.io/grpc", rs.http, "retry.linkerd.io/http", "a GRPCRoute"
		}
		if len(ignored) > 0 {
			r.noteIgnored(rt, from, ignoredName, "is not valid on "+kind+": Linkerd ignores it")
		}
		if rs.limitSet || rs.timeout > 0 || len(conds) > 0 {
			rt.Tries = rs.limit + 1 // the limit counts retries
			rt.RetryOn, rt.Backoff = conds, LinkerdBackoff
			if !rs.limitSet {
				rt.Defaults = append(rt.Defaults, "retry.linkerd.io/limit")
			}
			if len(conds) == 0 {
				rt.Defaults = append(rt.Defaults, condName)
			}
		}
		// retry.linkerd.io/timeout bounds each try; without it, the rule's
		// timeouts.backendRequest does ("a new backendRequest timeout will be started
		// for each retry request"), as the Gateway API reading set it.
		if rs.timeout > 0 {
			rt.PerTryTimeout = rs.timeout
		}
	}
	if doTimeout {
		// The route's own annotation wins over its timeouts.request; a parent
		// Service's applies only where the rule sets no timeouts.request ("route-level
		// timeout configuration overrides all timeout annotations on the parent
		// Service").
		if _, ok := ann["timeout.linkerd.io/request"]; ok && (from == nil || timeouts == nil || timeouts.Request == nil) {
			rt.Timeout = request
		}
		if response > 0 {
			rt.Unsupported = append(rt.Unsupported, "timeout.linkerd.io/response")
		}
		if idle > 0 {
			rt.Unsupported = append(rt.Unsupported, "timeout.linkerd.io/idle")
		}
	}
	slices.Sort(rt.Unsupported)
	rt.Unsupported = slices.Compact(rt.Unsupported)
}

// ownAnnotations are the Linkerd annotations of the route's own metadata, from the
// positions recorded.
func (rt *Route) ownAnnotations() map[string]string {
	out := map[string]string{}
	for _, k := range append(slices.Clone(linkerdRetry), linkerdTimeout...) {
		if _, ok := rt.docPos[formatPath([]pathElem{key("metadata"), key("annotations"), key(k)})]; ok {
			out[k] = ""
		}
	}
	return out
}

func (r *reader) noteIgnored(rt *Route, from *Policy, name, msg string) {
	if rt.Rule != 0 {
		return
	}
	if from != nil {
		line, col := from.Position(formatPath([]pathElem{key("metadata"), key("annotations"), key(name)}))
		r.set.Notes = append(r.set.Notes, Note{File: from.File, Line: line, Column: col, Msg: fmt.Sprintf("%s on Service %s %s", name, from.Name, msg)})
		return
	}
	line, col := rt.Position(name)
	r.set.Notes = append(r.set.Notes, Note{File: rt.File, Line: line, Column: col, Msg: name + " " + msg})
}

// service reads a Service for Linkerd's retry and timeout annotations, which the
// routes whose parent it is inherit; a Service without them is skipped.
func (r *reader) service(w *walker, root *yaml3.Node) {
	md := child(root, "metadata")
	anns := child(md, "annotations")
	ann := map[string]string{}
	if anns != nil && anns.Kind == yaml3.MappingNode {
		for i := 0; i+1 < len(anns.Content); i += 2 {
			k, v := anns.Content[i], deref(anns.Content[i+1])
			if !strings.HasPrefix(k.Value, "retry.linkerd.io/") && !strings.HasPrefix(k.Value, "timeout.linkerd.io/") {
				continue
			}
			if v == nil || v.Kind != yaml3.ScalarNode || v.ShortTag() != "!!str" {
				r.fail(w.file, v, []pathElem{key("metadata"), key("annotations"), key(k.Value)}, "want a string, not %s: quote it", describeNode(v))
				continue
			}
			ann[k.Value] = v.Value
		}
	}
	if len(ann) == 0 {
		r.note(w.file, root, "Service %s: skipped: it has no Linkerd retry or timeout annotations", objectName(root))
		return
	}
	p := &Policy{Source: SourceLinkerd, Kind: "Service", Namespace: scalarOf(child(md, "namespace")), Name: scalarOf(child(md, "name")),
		File: w.file, Line: root.Line, Column: root.Column, Annotations: ann, annotations: ann, pos: docPositions(root, "")}
	p.Targets = []string{p.Name}
	p.services = []string{fqdn(p.Name, p.Namespace)}
	readLinkerd(ann, func(name, format string, args ...any) {
		n := keyOf(anns, name)
		if v := child(anns, name); v != nil && !strings.Contains(format, "not an annotation") {
			n = v
		}
		r.fail(w.file, n, []pathElem{key("metadata"), key("annotations"), key(name)}, format, args...)
	})
	r.set.Policies = append(r.set.Policies, p)
}

func describeNode(n *yaml3.Node) string {
	if n == nil {
		return "nothing"
	}
	return describe(n)
}
