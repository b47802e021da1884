package policyk8s_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policyk8s"
)

// parse reads one manifest, failing the test on error.
func parse(t *testing.T, yml string) *policyk8s.Set {
	t.Helper()
	s, err := policyk8s.Parse("m.yaml", []byte(yml))
	require.NoError(t, err)
	return s
}

// problems returns each ConfigError of a refused manifest.
func problems(t *testing.T, yml string) []*policyk8s.ConfigError {
	t.Helper()
	s, err := policyk8s.Parse("m.yaml", []byte(yml))
	require.Error(t, err, "Parse accepted:\n%s", yml)
	require.Nil(t, s)
	require.ErrorIs(t, err, policyk8s.ErrInvalid)
	var out []*policyk8s.ConfigError
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *policyk8s.ConfigError
		require.True(t, errors.As(e, &ce), "%T is no ConfigError", e)
		out = append(out, ce)
	}
	return out
}

const httpRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
  namespace: ns
spec:
  rules:
  - backendRefs:
    - name: svc
`

// TestGatewayAPI_AttemptsCountsRetries: GEP-1731's attempts is "the maximum number
// of times an individual request … should be retried": tries are attempts + 1.
func TestGatewayAPI_AttemptsCountsRetries(t *testing.T) {
	for _, tc := range []struct {
		retry     string
		tries     int
		defaults  []string
		worstCase time.Duration
	}{
		{"", 1, []string{"timeouts", "retry"}, 0},                                                  // no retry stanza: one try as written
		{"    retry: {attempts: 1}\n", 2, []string{"timeouts", "retry.codes", "retry.backoff"}, 0}, // 1 retry
		{"    retry: {attempts: 4, codes: [503]}\n", 5, []string{"timeouts", "retry.backoff"}, 0},
		{"    retry: {codes: [503]}\n", 0, []string{"timeouts", "retry.attempts", "retry.backoff"}, 0}, // implementation-specific
		// Every try times out at 1s, the request at 10s: 3 tries end sooner? No:
		// the back-off is a minimum, so only the request timeout bounds them.
		{"    timeouts: {request: 10s, backendRequest: 1s}\n    retry: {attempts: 2, backoff: 50ms}\n", 3, []string{"retry.codes"}, 10 * time.Second},
		// One try: its backendRequest bounds it.
		{"    timeouts: {backendRequest: 1s}\n", 1, []string{"timeouts.request", "retry"}, time.Second},
	} {
		s := parse(t, httpRoute+tc.retry)
		require.Len(t, s.Routes, 1)
		r := s.Routes[0]
		require.Equal(t, tc.tries, r.Tries, "%q: Tries", tc.retry)
		require.Equal(t, tc.tries, r.AttemptsAtMost(), "%q: AttemptsAtMost", tc.retry)
		require.Equal(t, tc.defaults, r.Defaults, "%q: Defaults", tc.retry)
		require.Equal(t, tc.worstCase, r.WorstCase(), "%q: WorstCase", tc.retry)
		require.Equal(t, policyk8s.SourceGatewayAPI, r.Source)
	}
}

// TestGatewayAPI_Fields: every field the rule gives is read as written, and placed.
func TestGatewayAPI_Fields(t *testing.T) {
	s, err := policyk8s.Load("testdata/gateway.yaml")
	require.NoError(t, err)
	require.Len(t, s.Routes, 4)
	r := s.Routes[0]
	require.Equal(t, "HTTPRoute", r.Kind)
	require.Equal(t, "shop", r.Namespace)
	require.Equal(t, "checkout", r.Name)
	require.Equal(t, []string{"shop.example.com"}, r.Hosts)
	require.Equal(t, []string{"edge"}, r.ParentRefs)
	require.Equal(t, []string{"cart"}, r.Backends)
	require.Equal(t, []policyk8s.Match{{PathType: "PathPrefix", Path: "/cart", Method: "POST"}}, r.Matches)
	require.Equal(t, []string{"500", "502", "503", "504"}, r.RetryOn)
	require.Equal(t, 3, r.Tries)
	require.Equal(t, 2*time.Second, r.PerTryTimeout)
	require.Equal(t, 10*time.Second, r.Timeout)
	require.Equal(t, 100*time.Millisecond, r.Backoff)
	require.Equal(t, "testdata/gateway.yaml", r.File)
	require.Equal(t, [2]int{14, 5}, [2]int{r.Line, r.Column})
	for field, want := range map[string][2]int{
		"retry.attempts":    {27, 7},
		"retry.codes[1]":    {26, 20},
		"timeouts.request":  {23, 7},
		"retry.notwritten":  {25, 5}, // the deepest field written above it
		"":                  {14, 5},
		"metadata.name":     {6, 3},
		"spec.hostnames[0]": {12, 5},
		"matches[0].path":   {15, 7},
	} {
		line, col := r.Position(field)
		require.Equal(t, want, [2]int{line, col}, "Position(%q)", field)
	}
	// The XBackendTrafficPolicy targeting cart bounds its retries.
	require.NotNil(t, r.Budget)
	require.Equal(t, policyk8s.Budget{Percent: 25, Interval: 20 * time.Second, MinRetryRate: 5, Source: policyk8s.SourceGatewayAPI,
		File: "testdata/gateway.yaml", Line: 53, Column: 3}, *r.Budget)
	require.Len(t, r.Policies, 1)
	require.Nil(t, s.Routes[1].Budget, "catalog has no policy")
	require.Equal(t, []policyk8s.Match{{PathType: "PathPrefix", Path: "/"}}, s.Routes[1].Matches, "no matches: every path")
	require.Equal(t, []string{"payments.money"}, s.Routes[2].Backends)
	g := s.Routes[3]
	require.Equal(t, "GRPCRoute", g.Kind)
	require.Equal(t, []policyk8s.Match{{PathType: "Exact", Service: "shop.Inventory", GRPCMethod: "Reserve"}}, g.Matches)
	require.Equal(t, 1, g.Tries, "GRPCRoute has no retry field")
	// The Deployment is skipped with a note, placed.
	require.Len(t, s.Notes, 1)
	require.Equal(t, 78, s.Notes[0].Line)
	require.Contains(t, s.Notes[0].Msg, "Deployment apps/v1 shop/cart: skipped")
}

// TestGatewayAPI_BudgetDefaults: a retryConstraint that leaves fields out takes the
// CRD's defaults: budget 20% over 10s, minRetryRate 10 per 1s.
func TestGatewayAPI_BudgetDefaults(t *testing.T) {
	s := parse(t, `apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: p, namespace: ns}
spec:
  targetRefs: [{group: "", kind: Service, name: svc}]
  retryConstraint: {}
---
`+httpRoute)
	require.Len(t, s.Policies, 1)
	b := s.Policies[0].Budget
	require.Equal(t, 20.0, b.Percent)
	require.Equal(t, 10*time.Second, b.Interval)
	require.Equal(t, 10.0, b.MinRetryRate)
	require.Equal(t, []string{"spec.retryConstraint.budget", "spec.retryConstraint.minRetryRate"}, s.Policies[0].Defaults)
	require.Same(t, b, s.Routes[0].Budget)
}

// TestIstio_AttemptsCountsRetries: Istio's attempts is the "number of retries to be
// allowed … The maximum possible number of requests made will be 1 + attempts";
// without retries Istio's default policy retries twice; attempts 0 disables.
func TestIstio_AttemptsCountsRetries(t *testing.T) {
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: ns}
spec:
  hosts: [svc]
  http:
  - route:
    - destination: {host: svc}
`
	for _, tc := range []struct {
		extra    string
		tries    int
		retryOn  []string
		defaults []string
		worst    time.Duration
	}{
		{"", 3, policyk8s.IstioDefaultRetryOn(), []string{"timeout", "retries"}, 0},
		{"    retries: {attempts: 0}\n", 1, nil, []string{"timeout"}, 0},
		{"    retries: {perTryTimeout: 1s}\n", 1, nil, []string{"timeout", "retries.attempts"}, 0}, // attempts absent: 0, off
		{"    retries: {attempts: 5}\n", 6, policyk8s.IstioDefaultRetryOn(), []string{"timeout", "retries.perTryTimeout", "retries.backoff", "retries.retryOn"}, 0},
		// 3 tries of 1s, waits at most 25ms and 75ms: 3.1s, under the 5s timeout.
		{"    timeout: 5s\n    retries: {attempts: 2, perTryTimeout: 1s, retryOn: 5xx}\n", 3, []string{"5xx"}, []string{"retries.backoff"}, 3100 * time.Millisecond},
		// 10 tries of 1s and their waits pass the 2s timeout: the timeout bounds it.
		{"    timeout: 2s\n    retries: {attempts: 9, perTryTimeout: 1s, backoff: 1s, retryOn: \"503\"}\n", 10, []string{"503"}, nil, 2 * time.Second},
		// No timeout: 2 tries of 500ms and one wait of at most 1 × 100ms.
		{"    retries: {attempts: 1, perTryTimeout: 500ms, backoff: 100ms}\n", 2, policyk8s.IstioDefaultRetryOn(), []string{"timeout", "retries.retryOn"}, 1100 * time.Millisecond},
	} {
		s := parse(t, vs+tc.extra)
		require.Len(t, s.Routes, 1)
		r := s.Routes[0]
		require.Equal(t, tc.tries, r.Tries, "%q: Tries", tc.extra)
		require.Equal(t, tc.retryOn, r.RetryOn, "%q: RetryOn", tc.extra)
		require.Equal(t, tc.defaults, r.Defaults, "%q: Defaults", tc.extra)
		require.Equal(t, tc.worst, r.WorstCase(), "%q: WorstCase", tc.extra)
		require.Equal(t, []string{"mesh"}, r.ParentRefs, "no gateways: the sidecars")
	}
}

// TestIstio_DestinationRule: outlierDetection, connectionPool and retryBudget are
// read with Istio's defaults, and attach to the routes whose destination is the
// rule's host, short names read in the resource's namespace.
func TestIstio_DestinationRule(t *testing.T) {
	s, err := policyk8s.Load("testdata/istio.yaml")
	require.NoError(t, err)
	require.Len(t, s.Routes, 3)
	require.Len(t, s.Policies, 1)
	p := s.Policies[0]
	require.Equal(t, &policyk8s.Breaker{Consecutive5xxErrors: 7, Interval: 5 * time.Second, BaseEjectionTime: 3 * time.Minute, MaxEjectionPercent: 10}, p.Breaker)
	require.Equal(t, &policyk8s.Bulkhead{MaxConnections: 100, MaxPendingRequests: 10, MaxRequests: 50, MaxRetries: 3, ConnectTimeout: 10 * time.Second}, p.Bulkhead)
	require.Equal(t, 10.0, p.Budget.Percent)
	require.Equal(t, 2, p.Budget.MinRetryConcurrency)
	require.Equal(t, time.Duration(0), p.Budget.Interval, "budgetInterval's default 0: requests in flight only")
	for _, r := range s.Routes {
		require.Same(t, p.Budget, r.Budget, "%s[%d]", r.Name, r.Rule)
	}
	r := s.Routes[0]
	require.Equal(t, []string{"gateway-error", "connect-failure", "409"}, r.RetryOn)
	require.Equal(t, []policyk8s.Match{{PathType: "prefix", Path: "/api/v2"}}, r.Matches)
	line, col := r.Position("retries.perTryTimeout")
	require.Equal(t, [2]int{22, 7}, [2]int{line, col})
}

// TestLinkerd_LimitCountsRetries: retry.linkerd.io/limit is "the maximum number of
// times a request can be retried", default 1; Linkerd reads 0 as unset.
func TestLinkerd_LimitCountsRetries(t *testing.T) {
	route := func(ann string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
  namespace: ns
  annotations:
` + ann + `spec:
  parentRefs: [{group: core, kind: Service, name: svc, port: 80}]
  rules:
  - timeouts: {request: 9s}
`
	}
	for _, tc := range []struct {
		ann      string
		tries    int
		retryOn  []string
		timeout  time.Duration
		defaults []string
	}{
		{"    retry.linkerd.io/http: 5xx\n", 2, []string{"5xx"}, 9 * time.Second, []string{"timeouts.backendRequest", "retry", "retry.linkerd.io/limit"}},
		{"    retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"3\"\n", 4, []string{"5xx"}, 9 * time.Second, []string{"timeouts.backendRequest", "retry"}},
		{"    retry.linkerd.io/http: 500-504\n    retry.linkerd.io/limit: \"0\"\n", 2, []string{"500-504"}, 9 * time.Second, []string{"timeouts.backendRequest", "retry", "retry.linkerd.io/limit"}},
		// The request annotation wins over timeouts.request; no retry annotation: one try.
		{"    timeout.linkerd.io/request: 2s\n", 1, nil, 2 * time.Second, []string{"timeouts.backendRequest", "retry"}},
		// A retry timeout alone turns retries on, with the default limit.
		{"    retry.linkerd.io/timeout: 100ms\n", 2, nil, 9 * time.Second, []string{"timeouts.backendRequest", "retry", "retry.linkerd.io/limit", "retry.linkerd.io/http"}},
	} {
		s := parse(t, route(tc.ann))
		r := s.Routes[0]
		require.Equal(t, policyk8s.SourceLinkerd, r.Source, tc.ann)
		require.Equal(t, tc.tries, r.Tries, "%q: Tries", tc.ann)
		require.Equal(t, tc.retryOn, r.RetryOn, "%q: RetryOn", tc.ann)
		require.Equal(t, tc.timeout, r.Timeout, "%q: Timeout", tc.ann)
		require.Equal(t, tc.defaults, r.Defaults, "%q: Defaults", tc.ann)
	}
}

// TestLinkerd_ServiceAnnotations: a route without retry annotations takes its parent
// Service's; a route with its own keeps them.
func TestLinkerd_ServiceAnnotations(t *testing.T) {
	s, err := policyk8s.Load("testdata/linkerd.yaml")
	require.NoError(t, err)
	require.Len(t, s.Routes, 2)
	own, inherited := s.Routes[0], s.Routes[1]
	require.Equal(t, 4, own.Tries)
	require.Equal(t, []string{"5xx", "429"}, own.RetryOn)
	require.Equal(t, 300*time.Millisecond, own.PerTryTimeout)
	require.Equal(t, 2*time.Second, own.Timeout)
	// 4 tries of 300ms and 3 waits of at most 25, 50 and 100ms (Linkerd's
	// controller's back-off): 1.375s, under the 2s request timeout.
	require.Equal(t, 1375*time.Millisecond, own.WorstCase())
	require.Empty(t, own.InheritedFrom)
	line, col := own.Position("retry.linkerd.io/limit")
	require.Equal(t, [2]int{9, 5}, [2]int{line, col})

	require.Equal(t, policyk8s.SourceLinkerd, inherited.Source)
	require.Equal(t, "Service booksapp/authors", inherited.InheritedFrom)
	require.Equal(t, 2, inherited.Tries, "the default limit, 1 retry")
	require.Equal(t, []string{"unavailable"}, inherited.RetryOn)
}

// TestLinkerd_MisplacedAnnotation: retry.linkerd.io/grpc on an HTTPRoute is ignored
// by Linkerd ("not valid on an HTTPRoute resource"), and noted: it turns no retry on.
func TestLinkerd_MisplacedAnnotation(t *testing.T) {
	s := parse(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
  annotations:
    retry.linkerd.io/grpc: unavailable
spec:
  rules:
  - {}
`)
	require.Equal(t, 1, s.Routes[0].Tries)
	require.Empty(t, s.Routes[0].RetryOn)
	require.Len(t, s.Notes, 1)
	require.Equal(t, 6, s.Notes[0].Line)
	require.Contains(t, s.Notes[0].Msg, "not valid on an HTTPRoute")
}

// TestBadInput: every problem is reported, placed at file:line:column, with a fix.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, yml string
		want      []string // each problem's "line:column: path: message" start
	}{
		{"malformed YAML", "apiVersion: v1\nkind: Service\nmetadata:\n  name: [a\n", []string{"m.yaml:4:3: YAML: did not find expected ',' or ']' (in the block that starts here)"}},
		{"unknown field, did you mean", httpRoute + "    retyr: {attempts: 2}\n",
			[]string{`m.yaml:10:5: spec.rules[0].retyr: unknown field "retyr" of HTTPRouteRule; did you mean retry?`}},
		{"two problems", httpRoute + "    retry: {attemps: 2, backoff: 1.5s}\n", []string{
			`m.yaml:10:13: spec.rules[0].retry.attemps: unknown field "attemps" of HTTPRouteRetry; did you mean attempts?`,
			`m.yaml:10:34: spec.rules[0].retry.backoff: "1.5s" is not a Gateway API duration`}},
		{"wrong type", httpRoute + "    retry: {attempts: two}\n",
			[]string{`m.yaml:10:23: spec.rules[0].retry.attempts: want a whole number, not "two"`}},
		{"attempts 0", httpRoute + "    retry: {attempts: 0}\n",
			[]string{`m.yaml:10:23: spec.rules[0].retry.attempts: 0 is below the Gateway API's minimum 1`}},
		{"backendRequest over request", httpRoute + "    timeouts: {request: 1s, backendRequest: 2s}\n",
			[]string{`m.yaml:10:45: spec.rules[0].timeouts.backendRequest: 2s is longer than timeouts.request 1s`}},
		{"istio unknown field", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  http:\n  - retries: {atempts: 2}\n    route: [{destination: {host: a}}]\n",
			[]string{`m.yaml:6:15: spec.http[0].retries.atempts: unknown field "atempts" of HTTPRetry; did you mean attempts?`}},
		{"istio bad duration", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  http:\n  - timeout: soon\n    route: [{destination: {host: a}}]\n",
			[]string{`m.yaml:6:14: spec.http[0].timeout: "soon" is not a duration`}},
		{"linkerd unquoted limit", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\n  annotations:\n    retry.linkerd.io/limit: 3\nspec: {}\n",
			[]string{`m.yaml:6:29: metadata.annotations["retry.linkerd.io/limit"]: want a string, not the number 3: quote it ("3")`}},
		{"linkerd misspelt annotation", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\n  annotations:\n    retry.linkerd.io/limits: \"3\"\nspec:\n  rules: [{}]\n",
			[]string{`m.yaml:6:5: metadata.annotations["retry.linkerd.io/limits"]: "retry.linkerd.io/limits" is not an annotation Linkerd reads: it ignores it; did you mean retry.linkerd.io/limit?`}},
		{"linkerd bad condition", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r\n  annotations:\n    retry.linkerd.io/http: 5xx,6xx\nspec:\n  rules: [{}]\n",
			[]string{`m.yaml:6:28: metadata.annotations["retry.linkerd.io/http"]: "6xx" is not a condition Linkerd retries`}},
		{"duplicate key", httpRoute + "    retry: {attempts: 1}\n    retry: {attempts: 2}\n",
			[]string{`m.yaml:11:5: spec.rules[0].retry: written twice in one mapping`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := problems(t, tc.yml)
			require.Len(t, ps, len(tc.want), "%v", ps)
			for i, p := range ps {
				got := strings.TrimPrefix(p.Error(), "policyk8s: invalid manifest: ")
				require.True(t, strings.HasPrefix(got, tc.want[i]), "problem %d:\n got %s\nwant %s…", i, got, tc.want[i])
			}
		})
	}
}

// TestSkipped: other kinds, documents that are no Kubernetes object, and empty
// documents are skipped, each with a placed note but the empty ones.
func TestSkipped(t *testing.T) {
	s := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n---\n# only a comment\n---\nfoo: bar\n---\n- a list\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n")
	require.Empty(t, s.Routes)
	var lines []int
	for _, n := range s.Notes {
		lines = append(lines, n.Line)
	}
	require.Equal(t, []int{1, 8, 10, 15}, lines, "%v", s.Notes)
	require.Contains(t, s.Notes[0].Msg, "ConfigMap v1 c: skipped")
	require.Contains(t, s.Notes[1].Msg, "no kind")
}

// TestJSON: a manifest in JSON is read, with positions.
func TestJSON(t *testing.T) {
	s := parse(t, `{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
 "metadata": {"name": "j"},
 "spec": {"rules": [{"retry": {"attempts": 3}}]}}`)
	require.Equal(t, 4, s.Routes[0].Tries)
	line, col := s.Routes[0].Position("retry.attempts")
	require.Equal(t, [2]int{3, 32}, [2]int{line, col})
}

// TestGatewayAPI_BackendRequestZeroTurnsItOff: "Setting a timeout to the zero
// duration (e.g. "0s") SHOULD disable the timeout completely"; the CRD's rule
// refuses only a backendRequest longer than a request that is not 0s.
func TestGatewayAPI_BackendRequestZeroTurnsItOff(t *testing.T) {
	s := parse(t, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  rules:
  - timeouts: {request: 10s, backendRequest: 0s}
    retry: {attempts: 2}
`)
	require.Equal(t, 10*time.Second, s.Routes[0].Timeout)
	require.Zero(t, s.Routes[0].PerTryTimeout)
}

// TestLinkerd_RouteTimeoutsAndServiceAnnotations: Linkerd's rules for where a
// route's timeouts come from. backendRequest bounds each retry when no
// retry.linkerd.io/timeout is set; a route's own timeouts.request wins over its
// parent Service's timeout.linkerd.io/request; annotations of the other kind of
// route turn no retry on; a Service with retry annotations and no route attached
// is a route of its own, for all traffic to it.
func TestLinkerd_RouteTimeoutsAndServiceAnnotations(t *testing.T) {
	s := parse(t, `apiVersion: v1
kind: Service
metadata:
  name: books
  namespace: app
  annotations:
    timeout.linkerd.io/request: 5s
    retry.linkerd.io/http: gateway-error
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: books, namespace: app}
spec:
  parentRefs: [{kind: Service, group: core, name: books}]
  rules:
  - timeouts: {request: 10s, backendRequest: 3s}
    backendRefs: [{name: books, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: g
  namespace: app
  annotations:
    retry.linkerd.io/http: 5xx
spec:
  parentRefs: [{kind: Service, group: core, name: grpc}]
  rules:
  - backendRefs: [{name: grpc, port: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: authors
  namespace: app
  annotations:
    retry.linkerd.io/limit: "3"
spec: {ports: [{port: 80}]}
`)
	require.Len(t, s.Routes, 3)
	books, g, authors := s.Routes[0], s.Routes[1], s.Routes[2]
	require.Equal(t, "Service app/books", books.InheritedFrom)
	require.Equal(t, 2, books.Tries, "the Service's gateway-error, Linkerd's default limit of 1 retry")
	require.Equal(t, 10*time.Second, books.Timeout, "the route's own timeouts.request, not the Service's 5s")
	require.Equal(t, 3*time.Second, books.PerTryTimeout, "backendRequest starts anew for each retry")

	require.Equal(t, 1, g.Tries, "retry.linkerd.io/http is not valid on a GRPCRoute")

	require.Equal(t, "Service", authors.Kind)
	require.Equal(t, []string{"Service/authors"}, authors.ParentRefs)
	require.Equal(t, 4, authors.Tries, "limit 3 retries, for all traffic to the Service")
	require.Equal(t, "linkerd Service app/authors", authors.Explain().Route)
}
