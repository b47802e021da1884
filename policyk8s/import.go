package policyk8s

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policyhttp"
)

// Import converts a Set, as Parse or Load read it from name, into config's model:
// one stack per route rule, named after it ("HTTPRoute shop/checkout rules[0]" is
// HTTPRoute_shop_checkout_rules_0), an HTTP route per path match, a gRPC route per
// method match. Each stack's fields are placed at the rule's fields. The
// conversion:
//   - the request timeout becomes the deadline ("off" when the rule sets none); a
//     rule that does not retry has no retry, and its per-try timeout, if shorter,
//     is its deadline;
//   - tries become retry.attempts; the per-try timeout the attempt timeout; the
//     retried statuses http_statuses (5xx: 500–599; gateway-error: 502–504;
//     retriable-4xx: 409; a status or a range as written) and gRPC conditions
//     grpc_codes; max_hint is off, as no mesh waits for Retry-After;
//   - Istio's back-off is Envoy's (strategy envoy, base backoff, cap 10 × base);
//     the Gateway API's backoff, a minimum, becomes strategy equal with base and cap
//     twice it, every wait between backoff and twice backoff;
//   - the route's budget becomes a ratio budget (percent / 100, minRetryRate per
//     second, interval as window); a DestinationRule's outlierDetection a breaker
//     (consecutive5xxErrors, baseEjectionTime as open timeout), its connectionPool a
//     bulkhead (http2MaxRequests, http1MaxPendingRequests as queue).
//
// What the model cannot say as the source does is a config.Note, never dropped in
// silence: each of Route.Unsupported (NoteNotCarried), attempts left to the
// implementation, regex and header matches, wildcard hosts (NoteNotCarried), and
// where the stack does otherwise (NoteDiffers): Linkerd's retries without back-off,
// Istio's per-host ejection and concurrency budget, an Istio prefix matching
// inside a path segment, a pattern routed by an earlier rule.
func Import(name string, set *Set) *config.Import {
	im := config.NewImport(name)
	for _, r := range set.Routes {
		rule := fmt.Sprintf("rules[%d]", r.Rule)
		if r.Kind == "VirtualService" {
			rule = fmt.Sprintf("http[%d]", r.Rule)
		}
		label := fmt.Sprintf("%s %s/%s %s", r.Kind, r.Namespace, r.Name, rule)
		if r.Namespace == "" {
			label = fmt.Sprintf("%s %s %s", r.Kind, r.Name, rule)
		}
		s, fields := stackOf(r)
		o := config.Origin{Format: r.Source, File: r.File, Source: r}
		stack := im.Add(label, s, o, fields)
		notes(im, stack, r, s)
		routes(im, stack, r)
	}
	return im
}

// sourceFields are the fields of a route, by source, that a stack's fields come
// from.
var sourceFields = map[string]map[string]string{
	SourceGatewayAPI: {"deadline": "timeouts.request", "attempt_timeout": "timeouts.backendRequest", "retry": "retry",
		"retry.attempts": "retry.attempts", "retry.http_statuses": "retry.codes", "retry.base": "retry.backoff", "retry.cap": "retry.backoff"},
	SourceIstio: {"deadline": "timeout", "attempt_timeout": "retries.perTryTimeout", "retry": "retries",
		"retry.attempts": "retries.attempts", "retry.http_statuses": "retries.retryOn", "retry.grpc_codes": "retries.retryOn",
		"retry.base": "retries.backoff", "retry.cap": "retries.backoff"},
	SourceLinkerd: {"deadline": "timeout.linkerd.io/request", "attempt_timeout": "retry.linkerd.io/timeout", "retry": "retry.linkerd.io/limit",
		"retry.attempts": "retry.linkerd.io/limit", "retry.http_statuses": "retry.linkerd.io/http", "retry.grpc_codes": "retry.linkerd.io/grpc"},
}

func ptr[T any](v T) *T { return &v }

// stackOf converts one route, and names the fields each stack field came from.
func stackOf(r *Route) (config.Stack, map[string]string) {
	var s config.Stack
	fields := map[string]string{}
	for k, v := range sourceFields[r.Source] {
		fields[k] = v
	}
	if r.Source == SourceLinkerd && r.Timeout > 0 && !strings.Contains(ownTimeout(r), "timeout.linkerd.io/request") {
		fields["deadline"] = "timeouts.request"
	}
	retrying := r.Tries > 1
	switch {
	case !retrying && r.PerTryTimeout > 0 && (r.Timeout == 0 || r.PerTryTimeout < r.Timeout):
		s.Deadline = &config.Duration{D: r.PerTryTimeout}
		fields["deadline"] = fields["attempt_timeout"]
	default:
		s.Deadline = &config.Duration{D: r.Timeout, Off: r.Timeout == 0}
	}
	if !retrying {
		return s, fields
	}
	if r.PerTryTimeout > 0 && (r.Timeout == 0 || r.PerTryTimeout < r.Timeout) {
		s.AttemptTimeout = &config.Duration{D: r.PerTryTimeout}
	}
	rt := &config.Retry{Attempts: ptr(r.Tries), MaxHint: &config.Duration{Off: true}}
	statuses, codes := retried(r)
	if len(r.RetryOn) > 0 {
		rt.HTTPStatuses = statuses
		rt.GRPCCodes = codes
	}
	switch r.Source {
	case SourceIstio:
		rt.Strategy, rt.Base, rt.Cap = ptr("envoy"), &config.Duration{D: r.Backoff}, &config.Duration{D: mulSat(r.Backoff, 10)}
	case SourceGatewayAPI:
		if r.Backoff > 0 {
			rt.Strategy, rt.Base, rt.Cap = ptr("equal"), &config.Duration{D: mulSat(r.Backoff, 2)}, &config.Duration{D: mulSat(r.Backoff, 2)}
		}
	}
	s.Retry = rt
	if b := r.Budget; b != nil && b.Percent > 0 {
		ratio := &config.Ratio{Ratio: ptr(b.Percent / 100)}
		if b.MinRetryRate > 0 {
			ratio.MinPerSecond = ptr(b.MinRetryRate)
		}
		if b.Interval > 0 {
			ratio.Window = &config.Duration{D: b.Interval}
		}
		s.Budget = &config.Budget{Ratio: ratio}
	}
	for _, p := range r.Policies {
		if b := p.Breaker; b != nil && s.Breaker == nil {
			n := b.Consecutive5xxErrors
			if n == 0 {
				n = b.ConsecutiveGatewayErrors
			}
			if n > 0 {
				s.Breaker = &config.Breaker{ConsecutiveFailures: ptr(n), OpenTimeout: &config.Duration{D: b.BaseEjectionTime}}
			}
		}
		if b := p.Bulkhead; b != nil && s.Bulkhead == nil && b.MaxRequests > 0 {
			s.Bulkhead = &config.Bulkhead{MaxConcurrent: ptr(b.MaxRequests)}
			if b.MaxPendingRequests > 0 {
				s.Bulkhead.MaxQueue = ptr(b.MaxPendingRequests)
			}
		}
	}
	return s, fields
}

// ownTimeout returns "timeout.linkerd.io/request" if the route's document writes
// that annotation.
func ownTimeout(r *Route) string {
	if _, ok := r.docPos[formatPath([]pathElem{key("metadata"), key("annotations"), key("timeout.linkerd.io/request")})]; ok {
		return "timeout.linkerd.io/request"
	}
	return ""
}

// grpcNames are the gRPC conditions of Envoy, Istio and Linkerd, as status codes.
var grpcNames = map[string]string{"cancelled": "CANCELLED", "deadline-exceeded": "DEADLINE_EXCEEDED", "internal": "INTERNAL",
	"resource-exhausted": "RESOURCE_EXHAUSTED", "unavailable": "UNAVAILABLE"}

// retried returns the statuses and gRPC codes a route's RetryOn retries.
func retried(r *Route) ([]int, []string) {
	set := map[int]bool{}
	var codes []string
	for _, c := range r.RetryOn {
		lc := strings.ToLower(strings.TrimSpace(c))
		if g, ok := grpcNames[lc]; ok {
			if !slices.Contains(codes, g) {
				codes = append(codes, g)
			}
			continue
		}
		switch {
		case r.Source == SourceLinkerd:
			for _, s := range linkerdStatuses([]string{c}) {
				set[s] = true
			}
		case lc == "5xx":
			for s := 500; s <= 599; s++ {
				set[s] = true
			}
		case lc == "gateway-error":
			set[502], set[503], set[504] = true, true, true
		case lc == "retriable-4xx":
			set[409] = true
		default:
			if n, err := strconv.Atoi(lc); err == nil && n >= 400 && n <= 599 {
				set[n] = true
			}
		}
	}
	statuses := []int{}
	for s := 400; s <= 599; s++ {
		if set[s] {
			statuses = append(statuses, s)
		}
	}
	return statuses, codes
}

// notes notes what the route says that the stack s says otherwise or cannot say.
func notes(im *config.Import, stack string, r *Route, s config.Stack) {
	for _, u := range r.Unsupported {
		field, _, _ := strings.Cut(u, " ")
		im.Note(stack, config.NoteNotCarried, field, u, fmt.Sprintf("%s honours %s; the stack has no field for it", r.Source, u))
	}
	if r.Tries == 0 {
		im.Note(stack, config.NoteNotCarried, "retry.attempts", "", "retry without attempts: the number of retries is implementation-specific; the stack makes no retry")
	}
	if r.Tries <= 1 {
		return
	}
	if len(r.RetryOn) == 0 {
		im.Note(stack, config.NoteDiffers, sourceFields[r.Source]["retry.http_statuses"], "",
			"the rule names no condition or code: the mesh retries as its implementation does; the stack retries its default statuses")
	}
	switch r.Source {
	case SourceLinkerd:
		im.Note(stack, config.NoteDiffers, "retry.linkerd.io/limit", "", "Linkerd retries at once; the stack waits its back-off between tries")
	case SourceGatewayAPI:
		if r.Backoff > 0 {
			im.Note(stack, config.NoteDiffers, "retry.backoff", r.Backoff.String(), fmt.Sprintf(
				"backoff %s is a minimum, the rest implementation-specific; the stack waits between %s and %s", r.Backoff, r.Backoff, 2*r.Backoff))
		} else {
			im.Note(stack, config.NoteDiffers, "retry", "", "retry without backoff: the wait is implementation-specific; the stack waits its default back-off")
		}
	}
	if r.Budget != nil {
		switch {
		case r.Budget.Percent <= 0:
			im.Note(stack, config.NoteNotCarried, "", "", fmt.Sprintf("the retry budget at %s:%d:%d allows 0%% retries; the stack has no budget",
				r.Budget.File, r.Budget.Line, r.Budget.Column))
		case r.Budget.Source == SourceIstio:
			im.Note(stack, config.NoteDiffers, "", "", fmt.Sprintf(
				"Istio's retryBudget (%s:%d:%d) bounds retries in flight to %v%% of requests in flight, at least %d; the stack's budget counts retries over a window",
				r.Budget.File, r.Budget.Line, r.Budget.Column, r.Budget.Percent, r.Budget.MinRetryConcurrency))
		}
	}
	if s.Breaker != nil {
		im.Note(stack, config.NoteDiffers, "", "", "Istio's outlierDetection ejects one host at a time, for baseEjectionTime × its ejections; the stack's breaker opens for the whole dependency")
	}
	if s.Bulkhead != nil {
		im.Note(stack, config.NoteDiffers, "", "", "Istio's connectionPool limits each client proxy's requests to the destination; the stack's bulkhead limits the process's calls")
	}
}

// plainHost is a host a ServeMux pattern can name: no wildcard, no port.
var plainHost = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// routes routes the rule's matches to its stack.
func routes(im *config.Import, stack string, r *Route) {
	for i, m := range r.Matches {
		at := fmt.Sprintf("matches[%d]", i)
		if r.Kind == "VirtualService" {
			at = fmt.Sprintf("match[%d]", i)
		}
		for _, o := range m.Others {
			im.Note(stack, config.NoteNotCarried, at+"."+o, "", fmt.Sprintf("the rule matches by %s too, which a pattern cannot say: the table sends it every request of its paths", o))
		}
		if r.grpc {
			name := m.Service
			if m.GRPCMethod != "" {
				name += "/" + m.GRPCMethod
			}
			switch {
			case m.PathType == "RegularExpression" || m.Service == "":
				im.Note(stack, config.NoteNotCarried, at, name, "a match of every service or by regular expression is no gRPC route name: the table does not route to the rule")
			case !im.AddGRPCRoute(name, stack):
				im.Note(stack, config.NoteDiffers, at, name, name+" is routed by an earlier rule: the table keeps that one")
			}
			continue
		}
		var paths []string
		switch strings.ToLower(m.PathType) {
		case "regularexpression", "regex":
			im.Note(stack, config.NoteNotCarried, at, m.Path, fmt.Sprintf("the rule matches paths by the regular expression %q, which a pattern cannot say: the table does not route to it", m.Path))
			continue
		case "exact":
			paths = []string{m.Path}
			if strings.HasSuffix(m.Path, "/") {
				paths = []string{m.Path + "{$}"}
			}
		default:
			switch {
			case m.Path == "" || strings.HasSuffix(m.Path, "/"):
				paths = []string{cmpOr(m.Path, "/")}
			default:
				paths = []string{m.Path, m.Path + "/"}
				if r.Source == SourceIstio {
					im.Note(stack, config.NoteDiffers, at, m.Path, fmt.Sprintf(
						"prefix %s matches any path that starts so (%sx too); the patterns %s and %s/ match it and the paths under it", m.Path, m.Path, m.Path, m.Path))
				}
			}
		}
		hosts := []string{""}
		if len(r.Hosts) > 0 {
			hosts = nil
			for _, h := range r.Hosts {
				if !plainHost.MatchString(h) || !strings.Contains(h, ".") {
					hostsField := "spec.hostnames"
					if r.Kind == "VirtualService" {
						hostsField = "spec.hosts"
					}
					im.Note(stack, config.NoteNotCarried, hostsField, h, fmt.Sprintf("host %q (a wildcard, a short name or a port) is no pattern's host: the table routes the rule's paths on every host", h))
					hosts = []string{""}
					break
				}
				hosts = append(hosts, h)
			}
		}
		method := ""
		if m.Method != "" {
			method = m.Method + " "
		}
		for _, h := range hosts {
			for _, p := range paths {
				pattern := method + h + p
				if _, err := policyhttp.NewRoutes(policyhttp.Route{Pattern: pattern}); err != nil {
					im.Note(stack, config.NoteNotCarried, at, pattern, fmt.Sprintf("%s is no http.ServeMux pattern: the table does not route to the rule", pattern))
					continue
				}
				if !im.AddHTTPRoute(pattern, stack) {
					im.Note(stack, config.NoteDiffers, at, pattern, pattern+" is routed by an earlier rule: the table keeps that one")
				}
			}
		}
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
