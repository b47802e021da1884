package policyenvoy_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func parseOne(t *testing.T, src string) *policyenvoy.Route {
	t.Helper()
	rs, err := policyenvoy.Parse([]byte(src))
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return rs[0]
}

func TestParse_TheRouteInTestdata(t *testing.T) {
	src, err := os.ReadFile("testdata/route.yaml")
	require.NoError(t, err)
	r := parseOne(t, string(src))
	require.Equal(t, "prefix /api", r.Name)
	require.Equal(t, 3*time.Second, r.Timeout)
	require.Equal(t, time.Second, r.PerTryTimeout)
	require.Equal(t, 2, r.NumRetries)
	require.Equal(t, []string{"5xx", "reset", "connect-failure"}, r.RetryOn)
	require.True(t, r.Retrying)
	require.Empty(t, r.Unsupported)
	require.Equal(t, "prefix /api: deadline → retry → attempt_timeout", r.Pipeline.String())
	e := r.Explain()
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, 3*time.Second, e.WorstCase, "3 × 1 s + back-off is more than 3 s: the route timeout bounds it")
}

// TestParse_EnvoysDefaults: a retry_policy with only retry_on takes Envoy's documented
// defaults: one retry, back-off from 25 ms to 250 ms, and the route's 15 s timeout.
func TestParse_EnvoysDefaults(t *testing.T) {
	r := parseOne(t, `{"cluster": "api", "retry_policy": {"retry_on": "5xx"}}`)
	require.Equal(t, policyenvoy.DefaultRouteTimeout, r.Timeout)
	require.True(t, r.DefaultTimeout)
	require.False(t, parseOne(t, `{"cluster": "api", "timeout": "15s"}`).DefaultTimeout)
	require.Equal(t, 1, r.NumRetries)
	require.Equal(t, 25*time.Millisecond, r.BaseInterval)
	require.Equal(t, 250*time.Millisecond, r.MaxInterval)
	require.Zero(t, r.PerTryTimeout)
	require.Equal(t, 2, r.Explain().MaxAttempts)

	none := parseOne(t, `{"cluster": "api", "timeout": "0s"}`)
	require.False(t, none.Retrying)
	require.Equal(t, "route: (empty)", none.Pipeline.String(), "timeout 0 turns the deadline off; no retry_policy, no retry")
}

func TestParse_ReportsWhatItCannotHonour(t *testing.T) {
	r := parseOne(t, `
cluster: api
hedge_policy: {initial_requests: 2}
retry_policy:
  retry_on: 5xx,retriable-headers,unavailable,made-up
  retriable_headers: [{name: x-retry, string_match: {exact: "yes"}}]
  retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts}]
  host_selection_retry_max_attempts: 3
`)
	require.Equal(t, []string{
		"hedge_policy",
		"retry_policy.host_selection_retry_max_attempts",
		"retry_policy.retriable_headers",
		"retry_policy.retry_host_predicate",
		"retry_policy.retry_on retriable-headers",
		"retry_policy.retry_on unavailable (a gRPC condition: Backstop reads gRPC retries from the service config)",
	}, r.Unsupported)
	require.Equal(t, []string{"made-up"}, r.UnknownRetryOn, "a condition Envoy does not know is not Backstop's to honour")
}

// TestParse_RefusesNegativeDurations: Envoy refuses a negative duration wherever it
// is; so does Parse, placed at the field and matching ErrNegativeDuration.
func TestParse_RefusesNegativeDurations(t *testing.T) {
	for _, tt := range []struct {
		src       string
		line, col int
		path      string
	}{
		{"route:\n  cluster: a\n  timeout: -1s\n", 3, 3, "route.timeout"},
		{"route:\n  cluster: a\n  retry_policy:\n    retry_on: 5xx\n    per_try_timeout: -0.5s\n", 5, 5, "route.retry_policy.per_try_timeout"},
		{"route:\n  cluster: a\n  retry_policy:\n    retry_back_off: {base_interval: -0.1s}\n", 4, 22, "route.retry_policy.retry_back_off.base_interval"},
		{`{"cluster": "a", "retryPolicy": {"rateLimitedRetryBackOff": {"resetHeaders": [{"name": "r"}], "maxInterval": "-3s"}}}`, 1, 95,
			"retryPolicy.rateLimitedRetryBackOff.maxInterval"},
		{"virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route: {cluster: a, idle_timeout: -2s}\n", 6, 25,
			"virtual_hosts[0].routes[0].route.idle_timeout"},
	} {
		_, err := policyenvoy.Parse([]byte(tt.src))
		var ce *policyenvoy.ConfigError
		require.ErrorAs(t, err, &ce, "Parse(%q)", tt.src)
		require.ErrorIs(t, err, policyenvoy.ErrNegativeDuration, "%v", err)
		require.ErrorIs(t, err, policyenvoy.ErrInvalid)
		require.Equal(t, [3]any{tt.line, tt.col, tt.path}, [3]any{ce.Line, ce.Column, ce.Path}, "%v", err)
		require.Contains(t, ce.Msg, "is negative; Envoy refuses negative durations")
	}
}

// TestRoute_Position: a route's fields are placed in the input as written, the
// virtual host's retry_policy where the route inherits it.
func TestRoute_Position(t *testing.T) {
	src := "virtual_hosts:\n- name: v\n  domains: ['*']\n  retry_policy: {retry_on: 5xx, num_retries: 7}\n  routes:\n" +
		"  - match: {prefix: /a}\n    route:\n      cluster: a\n      timeout: 0s\n" +
		"  - match: {prefix: /b}\n    route:\n      cluster: b\n      retry_policy:\n        retry_on: retriable-status-codes\n        retriable_status_codes: [503, 504]\n"
	rs, err := policyenvoy.Parse([]byte(src))
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for _, tt := range []struct {
		r         *policyenvoy.Route
		field     string
		line, col int
	}{
		{rs[0], "", 7, 5}, {rs[0], "timeout", 9, 7}, {rs[0], "retry_policy.num_retries", 4, 33}, {rs[0], "retry_policy", 4, 3},
		{rs[0], "retry_policy.per_try_timeout", 4, 3},
		{rs[1], "retry_policy.retriable_status_codes[1]", 15, 39}, {rs[1], "retry_policy.retry_on", 14, 9}, {rs[1], "timeout", 11, 5},
		{rs[0], "match", 6, 5}, {rs[1], "match.prefix", 10, 13}, {rs[1], "match.headers", 10, 5}, // the Route's match
	} {
		l, c := tt.r.Position(tt.field)
		require.Equal(t, [2]int{tt.line, tt.col}, [2]int{l, c}, "%s: Position(%q)", tt.r.Name, tt.field)
	}
	require.Equal(t, []int{503, 504}, rs[1].RetriableStatusCodes)
}

func TestParse_RefusesInvalidConfigs(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"cluster: api\nretry_policy: {retry_back_off: {base_interval: 0s}}", "retry_policy.retry_back_off.base_interval: value must be greater than 0s"},
		{"cluster: [unclosed", "line 1, column 1: YAML: "},
		{`{"cluster": "api", "timeout": "soon"}`, "RouteAction"},
		{`{"cluster": "api", "no_such_field": 1}`, "no_such_field"},
		{`42`, "want an object"},
		{`{"routes": [{"match": {"prefix": "/"}, "redirect": {"path_redirect": "/x"}}], "name": "v", "domains": ["*"]}`, "no route forwards"},
		{`{"match": {"prefix": "/"}}`, "Route"},
	} {
		_, err := policyenvoy.Parse([]byte(tt.src))
		if !errors.Is(err, policyenvoy.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want ErrInvalid mentioning %q", tt.src, err, tt.want)
		}
	}
}

// TestParse_TheSeedsRouteBlock: a route: block with no match — the snippet Envoy users
// paste — loads as a Route matching every path, named "route".
func TestParse_TheSeedsRouteBlock(t *testing.T) {
	src, err := os.ReadFile("testdata/seed-envoy-route.yaml")
	require.NoError(t, err)
	r := parseOne(t, string(src))
	require.Equal(t, "route", r.Name)
	require.Equal(t, 3*time.Second, r.Timeout)
	require.Equal(t, time.Second, r.PerTryTimeout)
	require.Equal(t, 2, r.NumRetries)
	require.Equal(t, []string{"connect-failure", "reset", "retriable-status-codes"}, r.RetryOn)
	require.Equal(t, 100*time.Millisecond, r.BaseInterval)
	require.Equal(t, time.Second, r.MaxInterval)
	require.Empty(t, r.Unsupported)
	e := r.Explain()
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, 3*time.Second, e.WorstCase)

	n, code := roundTrip(t, fast(t, string(src)), status(503))
	require.Equal(t, 3, n, "503 is in retriable_status_codes: 3 attempts")
	require.Equal(t, 503, code)
	n, _ = roundTrip(t, fast(t, string(src)), status(500))
	require.Equal(t, 1, n, "500 is not")

	// The Route form with a match still names the route by its match.
	withMatch := parseOne(t, "match: {prefix: /api}\n"+string(src))
	require.Equal(t, "prefix /api", withMatch.Name)
}

// fast parses src with its back-off shrunk to 1 ms, for tests on a real server.
func fast(t *testing.T, src string) *policyenvoy.Route {
	t.Helper()
	return parseOne(t, strings.NewReplacer("base_interval: 0.1s", "base_interval: 0.001s", "max_interval: 1s", "max_interval: 0.001s").Replace(src))
}

// TestParse_ErrorsNameTheInputsLineColumnAndPath: an error points into the YAML or
// JSON as written — never into the JSON the YAML was converted to.
func TestParse_ErrorsNameTheInputsLineColumnAndPath(t *testing.T) {
	seed, err := os.ReadFile("testdata/seed-envoy-route.yaml")
	require.NoError(t, err)
	typo := strings.Replace(string(seed), "num_retries", "num_retrys", 1)
	for _, tt := range []struct {
		name, src  string
		line, col  int
		path, want string
	}{
		{"unknown field in the seed", typo, 7, 5, "route.retry_policy.num_retrys", `unknown field "num_retrys"`},
		{"bad value", "route:\n  cluster: a\n  timeout: soon\n", 3, 3, "route.timeout", `invalid google.protobuf.Duration value "soon"`},
		{"bad enum in a list", "route:\n  cluster: a\n  retry_policy:\n    rate_limited_retry_back_off:\n      reset_headers:\n      - {name: x, format: NOPE}\n",
			6, 19, "route.retry_policy.rate_limited_retry_back_off.reset_headers[0].format", `"NOPE"`},
		{"Envoy's validation, deep", "virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route: {cluster: a}\n" +
			"  - match: {prefix: /x}\n    route:\n      cluster: a\n      retry_policy:\n        retry_back_off: {base_interval: 0s}\n",
			11, 26, "virtual_hosts[0].routes[1].route.retry_policy.retry_back_off.base_interval", "value must be greater than 0s"},
		{"validation, spelled in camelCase", "route:\n  cluster: a\n  retryPolicy:\n    retryBackOff: {baseInterval: 0s}\n",
			4, 20, "route.retryPolicy.retryBackOff.baseInterval", "value must be greater than 0s"},
		{"JSON value", "{\n  \"cluster\": \"api\",\n  \"timeout\": \"soon\"\n}", 3, 3, "timeout", "invalid google.protobuf.Duration"},
		{"malformed JSON", "{\n  \"cluster\": \"api\"\n  \"timeout\": \"3s\"\n}", 3, 3, "", "JSON: invalid character"},
		{"truncated JSON", "{\"cluster\": \"api\",", 1, 19, "", "JSON: unexpected end"},
		{"JSON with tabs", "{\n\t\"cluster\": \"api\",\n\t\"timeout\": \"soon\"\n}", 3, 2, "timeout", "invalid google.protobuf.Duration"},
		{"YAML syntax: its line, at its first character", "virtual_hosts:\n- name: v\n  routes: [\n", 3, 3, "", "YAML: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policyenvoy.Parse([]byte(tt.src))
			var ce *policyenvoy.ConfigError
			require.ErrorAs(t, err, &ce, "Parse(%q)", tt.src)
			require.ErrorIs(t, err, policyenvoy.ErrInvalid)
			require.Equal(t, tt.line, ce.Line, "line: %v", err)
			require.Equal(t, tt.col, ce.Column, "column: %v", err)
			require.Equal(t, tt.path, ce.Path, "%v", err)
			require.Contains(t, ce.Msg, tt.want)
			if tt.col > 0 {
				require.Contains(t, err.Error(), fmt.Sprintf("line %d, column %d: %s", tt.line, tt.col, tt.path))
			}
		})
	}
}

// problems returns each problem of err, one *ConfigError per line of err.Error().
func problems(t *testing.T, err error) []*policyenvoy.ConfigError {
	t.Helper()
	require.ErrorIs(t, err, policyenvoy.ErrInvalid)
	var out []*policyenvoy.ConfigError
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *policyenvoy.ConfigError
		require.ErrorAs(t, e, &ce)
		out = append(out, ce)
	}
	require.Len(t, strings.Split(err.Error(), "\n"), len(out), "one line per problem: %v", err)
	return out
}

// TestParse_ReportsEveryProblemAtOnce: a bad duration, an unknown retry_on condition
// and an unknown field come back in one error, in the file's order. Each is placed
// and has its fix. The unknown field no longer hides the condition.
func TestParse_ReportsEveryProblemAtOnce(t *testing.T) {
	src, err := os.ReadFile("testdata/three-problems.yaml")
	require.NoError(t, err)
	_, err = policyenvoy.Parse(src)
	require.Error(t, err)
	const prefix = "policyenvoy: invalid route config: "
	want := []string{
		prefix + `line 5, column 3: route.timeout: invalid google.protobuf.Duration value "3 s" (as an Envoy Route); want a duration such as "1.5s"`,
		prefix + `line 7, column 32: route.retry_policy.retry_on: "5xxx" is not a retry_on condition Envoy knows: it never retries on it; did you mean 5xx?`,
		prefix + `line 9, column 5: route.retry_policy.num_retrys: unknown field "num_retrys" (as an Envoy Route); did you mean num_retries?`,
	}
	require.Equal(t, want, strings.Split(err.Error(), "\n"))
	ps := problems(t, err)
	require.Equal(t, [][2]int{{5, 3}, {7, 32}, {9, 5}}, [][2]int{{ps[0].Line, ps[0].Column}, {ps[1].Line, ps[1].Column}, {ps[2].Line, ps[2].Column}})
	require.ErrorIs(t, ps[1], policyenvoy.ErrUnknownRetryOn)
	require.NotErrorIs(t, ps[0], policyenvoy.ErrUnknownRetryOn)

	// Alone, an unknown condition is no error: Envoy reads it and never retries on it.
	fixed := strings.NewReplacer("3 s", "3s", "num_retrys", "num_retries").Replace(string(src))
	require.Equal(t, []string{"5xxx"}, parseOne(t, fixed).UnknownRetryOn)
}

// TestParse_ReportsEveryProblemOfEachRoute: problems in several routes and virtual
// hosts, of every kind Parse finds, come back together in the input's order.
func TestParse_ReportsEveryProblemOfEachRoute(t *testing.T) {
	src := `virtual_hosts:
- name: v
  domains: ['*']
  retry_policy: {retry_on: 5xx, retry_back_off: {base_interval: 2s, max_interval: 1s}}
  routes:
  - match: {prefix: /a}
    route: {cluster: a, timeout: -1s}
  - match: {prefix: /b}
    route:
      cluster: b
      retry_policy:
        retriable_status_codes: [503, x]
        rate_limited_retry_back_off: {reset_headers: [{name: r, format: NOPE}]}
  - match: {prefix: /c}
    route: {cluster: c, retry_policy: {retry_back_off: {base_interval: 0s}}}
`
	_, err := policyenvoy.Parse([]byte(src))
	var got []string
	for _, ce := range problems(t, err) {
		got = append(got, fmt.Sprintf("%d:%d %s", ce.Line, ce.Column, ce.Path))
	}
	require.Equal(t, []string{
		"4:69 virtual_hosts[0].retry_policy.retry_back_off.max_interval",                                          // max_interval below base_interval
		"7:25 virtual_hosts[0].routes[0].route.timeout",                                                           // negative
		"12:39 virtual_hosts[0].routes[1].route.retry_policy.retriable_status_codes[1]",                           // not a number
		"13:65 virtual_hosts[0].routes[1].route.retry_policy.rate_limited_retry_back_off.reset_headers[0].format", // not an enum value
		"15:57 virtual_hosts[0].routes[2].route.retry_policy.retry_back_off.base_interval",                        // Envoy's validation
	}, got, "%v", err)
	require.ErrorIs(t, err, policyenvoy.ErrNegativeDuration)
}

// TestParse_SkipsRulesOnFieldsItCouldNotRead: a field protojson refuses is reported
// once; the rules that read it are not checked against what is left.
func TestParse_SkipsRulesOnFieldsItCouldNotRead(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		// Without its cluster, the route has no cluster_specifier: not reported.
		{"route: {cluster: 5}\n", `line 1, column 9: route.cluster: invalid value for string field cluster: 5 (as an Envoy Route); want a string`},
		// Without its base_interval, max_interval is not compared with it.
		{"route:\n  cluster: a\n  retry_policy:\n    retry_back_off: {base_interval: soon, max_interval: 1s}\n",
			`line 4, column 22: route.retry_policy.retry_back_off.base_interval: invalid google.protobuf.Duration value "soon" (as an Envoy Route); want a duration such as "1.5s"`},
		// A negative base_interval is reported once, not also by Envoy's validation.
		{"route:\n  cluster: a\n  retry_policy:\n    retry_back_off: {base_interval: -1s}\n",
			`line 4, column 22: route.retry_policy.retry_back_off.base_interval: -1s is negative; Envoy refuses negative durations: want 0s or more`},
		// Two members of a oneof: keep one.
		{`{"cluster": "a", "cluster_header": "h"}`, `line 1, column 18: cluster_header: error parsing "cluster_header", oneof envoy.config.route.v3.RouteAction.cluster_specifier is already set (as an Envoy RouteAction); keep one field of cluster_specifier: cluster, cluster_header`},
	} {
		_, err := policyenvoy.Parse([]byte(tt.src))
		require.Len(t, problems(t, err), 1, "Parse(%q) = %v", tt.src, err)
		require.True(t, strings.HasPrefix(err.Error(), "policyenvoy: invalid route config: "+tt.want), "Parse(%q) = %v\nwant %s", tt.src, err, tt.want)
	}
}

// roundTrip sends one GET through the route's pipeline and classifier to a server
// answering with answer(n), and returns the server's request count and the status.
func roundTrip(t *testing.T, r *policyenvoy.Route, answer func(w http.ResponseWriter, n int)) (int, int) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w, int(n.Add(1))) }))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(tr, r.Pipeline, policyhttp.Options{Classifier: r.Classifier})}
	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	return int(n.Load()), res.StatusCode
}

func status(code int, hdr ...string) func(http.ResponseWriter, int) {
	return func(w http.ResponseWriter, _ int) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
	}
}

func TestClassifier_RetryOn(t *testing.T) {
	route := func(retryOn string, extra string) *policyenvoy.Route {
		return parseOne(t, `{"cluster": "api", "retry_policy": {"retry_on": "`+retryOn+`", "num_retries": 2,
			"retry_back_off": {"base_interval": "0.001s"}`+extra+`}}`)
	}
	for _, tt := range []struct {
		name     string
		r        *policyenvoy.Route
		answer   func(http.ResponseWriter, int)
		requests int
	}{
		{"5xx retries a 500", route("5xx", ""), status(500), 3},
		{"gateway-error does not retry a 500", route("gateway-error", ""), status(500), 1},
		{"gateway-error retries a 503", route("gateway-error", ""), status(503), 3},
		{"retriable-4xx retries a 409", route("retriable-4xx", ""), status(409), 3},
		{"5xx does not retry a 409", route("5xx", ""), status(409), 1},
		{"retriable-status-codes", route("retriable-status-codes", `, "retriable_status_codes": [418]`), status(418), 3},
		{"a rate-limited response is not retried under 5xx", route("5xx", ""), status(503, "X-Envoy-Ratelimited", "true"), 1},
		{"but is under envoy-ratelimited", route("envoy-ratelimited", ""), status(429, "X-Envoy-Ratelimited", "true"), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, _ := roundTrip(t, tt.r, tt.answer)
			require.Equal(t, tt.requests, n)
		})
	}
}

// TestClassifier_ResetHeaders: rate_limited_retry_back_off as Envoy documents it. The
// reset headers are tried in order; one whose interval is unreadable, in the past or
// above max_interval is passed over for the next; the wait is random(interval, 1.5 ×
// interval); with no header left, or an interval of 0, the route's back-off applies.
func TestClassifier_ResetHeaders(t *testing.T) {
	const cfg = `
cluster: api
retry_policy:
  retry_on: retriable-status-codes
  retriable_status_codes: [429]
  rate_limited_retry_back_off:
    reset_headers: [{name: Retry-After, format: SECONDS}, {name: X-RateLimit-Reset, format: UNIX_TIMESTAMP}]
`
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	res := func(hdr ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		return &http.Response{StatusCode: 429, Status: "429 Too Many Requests", Header: h}
	}
	for _, tt := range []struct {
		name    string
		maxInt  string // max_interval, "" for Envoy's default 300 s
		rand    float64
		hdr     []string
		want    time.Duration
		backOff bool // no hint: the route's back-off
	}{
		{"seconds", "", 0, []string{"Retry-After", "60"}, 60 * time.Second, false},
		{"jitter up to 1.5 ×", "", 0.5, []string{"Retry-After", "60"}, 75 * time.Second, false}, // 60 s + 0.5 · 30 s
		{"the default max_interval is 300 s", "", 0, []string{"Retry-After", "300"}, 300 * time.Second, false},
		{"above it: passed over", "", 0, []string{"Retry-After", "301"}, 0, true},
		{"above it: the next header", "", 0, []string{"Retry-After", "301", "X-RateLimit-Reset", unix(5 * time.Second)}, 5 * time.Second, false},
		{"above a set max_interval", "2s", 0, []string{"Retry-After", "100"}, 0, true},
		{"within it", "2s", 0.999, []string{"Retry-After", "2"}, 2999 * time.Millisecond, false}, // 2 s + 0.999 · 1 s
		{"unreadable: the next header", "", 0, []string{"Retry-After", "soon", "X-RateLimit-Reset", unix(7 * time.Second)}, 7 * time.Second, false},
		{"an HTTP-date is not SECONDS", "", 0, []string{"Retry-After", "Sun, 01 Mar 2026 12:01:00 GMT"}, 0, true},
		{"a timestamp, in whole seconds", "", 0, []string{"X-RateLimit-Reset", unix(1500 * time.Millisecond)}, time.Second, false},
		{"a timestamp in the past is passed over", "", 0, []string{"X-RateLimit-Reset", unix(-time.Hour)}, 0, true},
		{"an interval of 0: the back-off", "", 0, []string{"Retry-After", "0", "X-RateLimit-Reset", unix(5 * time.Second)}, 0, true},
		{"no header", "", 0, nil, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := cfg
			if tt.maxInt != "" {
				src += "    max_interval: " + tt.maxInt + "\n"
			}
			rs, err := policyenvoy.ParseWith([]byte(src), policyenvoy.Options{Rand: policytest.NewRand(tt.rand)})
			require.NoError(t, err)
			err = rs[0].Classifier(res(tt.hdr...), now)
			require.True(t, retry.DefaultShouldRetry(err), "%v is retried", err)
			d, ok := fault.Hint(err)
			if tt.backOff {
				require.False(t, ok, "%v: want the route's back-off, got a wait of %v", tt.hdr, d)
				return
			}
			require.True(t, ok, "%v: %v carries a wait", tt.hdr, err)
			require.Equal(t, tt.want, d, "%v", tt.hdr)
		})
	}
}

// rateLimited is the route of the attack: 429 with Retry-After: 60, five retries, and a
// rate_limited_retry_back_off without max_interval.
const rateLimited = `
cluster: api
timeout: %s
retry_policy:
  retry_on: retriable-status-codes
  retriable_status_codes: [429]
  num_retries: 5
  rate_limited_retry_back_off:
    reset_headers: [{name: Retry-After, format: SECONDS}]
`

// TestRateLimitedBackOff_WaitsWhatTheServerAsks: without max_interval, Retry-After: 60
// is honoured (Envoy's default max_interval is 300 s): each retry waits
// random(60 s, 90 s), not 0.
func TestRateLimitedBackOff_WaitsWhatTheServerAsks(t *testing.T) {
	clock := policytest.NewClock(time.Now()).AutoAdvance(true)
	rs, err := policyenvoy.ParseWith([]byte(fmt.Sprintf(rateLimited, "0s")),
		policyenvoy.Options{Clock: clock, Rand: policytest.NewRand(0.5)})
	require.NoError(t, err)
	n, code := roundTrip(t, rs[0], status(429, "Retry-After", "60"))
	require.Equal(t, 6, n, "num_retries 5: 6 attempts")
	require.Equal(t, 429, code)
	require.Equal(t, []time.Duration{75 * time.Second, 75 * time.Second, 75 * time.Second, 75 * time.Second, 75 * time.Second},
		clock.Waits(), "random(60 s, 90 s) drawn at 0.5: 60 s + 0.5 · 30 s")
}

// TestRateLimitedBackOff_AWaitPastTheTimeoutEndsTheCall: with the route's default 15 s
// timeout, a 60 s wait cannot end in time: the call ends at once with the 429, after
// one request.
func TestRateLimitedBackOff_AWaitPastTheTimeoutEndsTheCall(t *testing.T) {
	r := parseOne(t, fmt.Sprintf(rateLimited, "15s"))
	n, code := roundTrip(t, r, status(429, "Retry-After", "60"))
	require.Equal(t, 1, n, "no retry can wait 60 s within 15 s")
	require.Equal(t, 429, code)
}

// TestRateLimitedBackOff_AboveMaxIntervalUsesTheBackOff: Retry-After: 400 is above the
// default 300 s: it is passed over, and the route's back-off (25 ms base) applies.
func TestRateLimitedBackOff_AboveMaxIntervalUsesTheBackOff(t *testing.T) {
	clock := policytest.NewClock(time.Now()).AutoAdvance(true)
	rs, err := policyenvoy.ParseWith([]byte(fmt.Sprintf(rateLimited, "0s")), policyenvoy.Options{Clock: clock, Rand: policytest.NewRand(0.999)})
	require.NoError(t, err)
	n, _ := roundTrip(t, rs[0], status(429, "Retry-After", "400"))
	require.Equal(t, 6, n)
	for i, w := range clock.Waits() {
		require.LessOrEqual(t, w, 250*time.Millisecond, "wait %d: Envoy's back-off, at most 10 × 25 ms", i+1)
	}
}

// TestRateLimitedBackOff_Explained: explain says what rate_limited_retry_back_off does.
func TestRateLimitedBackOff_Explained(t *testing.T) {
	e := parseOne(t, fmt.Sprintf(rateLimited, "0s")).Explain()
	s := e.String()
	for _, want := range []string{"Retry-After (seconds)", "1s to 5m0s", "random(interval, 1.5 × interval), at most 7m30s",
		"above 5m0s is passed over for the next", "with none left the back-off above applies"} {
		require.Contains(t, s, want)
	}
	require.Equal(t, 450*time.Second, e.Stack[0].MaxHint)

	plain := parseOne(t, `{"cluster": "api", "retry_policy": {"retry_on": "5xx"}}`).Explain()
	require.Zero(t, plain.Stack[1].MaxHint, "no reset headers: no server waits")
	require.NotContains(t, plain.String(), "rate_limited_retry_back_off")
}

func TestBackoff_EnvoysFormula(t *testing.T) {
	base, cap := 25*time.Millisecond, 250*time.Millisecond
	for n, want := range map[int]time.Duration{1: 25 * time.Millisecond, 2: 75 * time.Millisecond, 3: 175 * time.Millisecond, 4: cap, 100: cap} {
		got := policyenvoy.Backoff{}.Delay(n, 0, base, cap, one{})
		require.InDelta(t, float64(want), float64(got), float64(time.Microsecond), "retry %d: up to (2^n − 1) · 25 ms, capped", n)
	}
}

type one struct{}

func (one) Float64() float64 { return 1 - 1e-12 }

// FuzzParse: any input either fails with a ConfigError matching ErrInvalid, placed
// within the input, or gives routes with a pipeline and a classifier.
func FuzzParse(f *testing.F) {
	src, _ := os.ReadFile("testdata/route.yaml")
	seed, _ := os.ReadFile("testdata/seed-envoy-route.yaml")
	for _, s := range []string{
		string(src),  // a RouteConfiguration
		string(seed), // a Route without match
		strings.Replace(string(seed), "num_retries", "num_retrys", 1), // an unknown field
		`{"cluster": "a"}`, // a RouteAction
		`{"cluster": "a", "retry_policy": {"retry_on": "5xx", "num_retries": 4294967295}}`,
		"routes: []\ndomains: ['*']\nname: v", // a VirtualHost
		`{"match": {"prefix": "/"}, "route": {"cluster": "a", "timeout": "315576000000s"}}`,
		"{\n\t\"cluster\": \"a\",\n\t\"timeout\": 1\n}", // JSON with tabs, a bad value
		"{\"cluster\": \"a\",",     // truncated JSON
		"a: &x {b: *x}\nroute: *x", // aliases
		"route:\n  cluster: a\n  retry_policy:\n    rate_limited_retry_back_off: {reset_headers: [{name: r, format: UNIX_TIMESTAMP}], max_interval: 1s}",
		"route:\n  cluster: a\n  timeout: -1s\n",                                                           // a negative duration
		`{"cluster": "a", "retry_policy": {"retry_on": "5xxx,reset", "per_try_timeout": "-0.000000001s"}}`, // an unknown condition; a negative duration
	} {
		f.Add(s)
	}
	lineBreak := regexp.MustCompile("\r\n|[\r\n\u0085\u2028\u2029]")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := policyenvoy.Parse([]byte(s))
		if err != nil {
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			// Lines as YAML counts them: CR LF, CR, LF, NEL, LS and PS each end one.
			lines := 1 + len(lineBreak.FindAllString(s, -1))
			prev := [2]int{1, 0}
			for _, e := range errs {
				var ce *policyenvoy.ConfigError
				if !errors.Is(e, policyenvoy.ErrInvalid) || !errors.As(e, &ce) {
					t.Fatalf("Parse(%q) = %v; want ConfigErrors matching ErrInvalid", s, err)
				}
				if ce.Line < 0 || ce.Line > lines || ce.Column < 0 || (ce.Column > 0 && ce.Line == 0) {
					t.Fatalf("Parse(%q) = %v: line %d, column %d is not in the input's %d lines", s, err, ce.Line, ce.Column, lines)
				}
				// In the input's order; those without a place last.
				if at := [2]int{ce.Line, ce.Column}; ce.Line > 0 && (prev[0] == 0 || at[0] < prev[0] || at[0] == prev[0] && at[1] < prev[1]) {
					t.Fatalf("Parse(%q) = %v: %d:%d after %d:%d", s, err, at[0], at[1], prev[0], prev[1])
				}
				prev = [2]int{ce.Line, ce.Column}
			}
			return
		}
		lines := 1 + len(lineBreak.FindAllString(s, -1))
		for _, r := range rs {
			if r.Pipeline == nil || r.Classifier == nil {
				t.Fatalf("Parse(%q): route %q without a pipeline or classifier", s, r.Name)
			}
			_ = r.Explain().String()
			for _, f := range []string{"", "timeout", "retry_policy.num_retries", "retry_policy.retriable_status_codes[3]"} {
				if l, c := r.Position(f); l < 0 || l > lines || c < 0 || (l == 0) != (c == 0) {
					t.Fatalf("Parse(%q): route %q: Position(%q) = %d:%d, not in the input's %d lines", s, r.Name, f, l, c, lines)
				}
			}
		}
	})
}

// FuzzResetHeaders: whatever the reset headers say, a rate-limited response either
// leaves the route's back-off or waits random(interval, 1.5 × interval) for a whole
// number of seconds from 1 s to max_interval — never less, never more; and the
// interval is the one a plain reading of the first usable header gives (the oracle).
func FuzzResetHeaders(f *testing.F) {
	for _, tt := range []struct {
		retryAfter, reset string
		now               int64
	}{
		{"60", "", 1772366400},                 // seconds
		{"301", "1772366405", 1772366400},      // above 300 s: the timestamp
		{"soon", "1772366407", 1772366400},     // unreadable: the timestamp
		{"0", "1772366405", 1772366400},        // 0: the back-off
		{"", "1772366300", 1772366400},         // in the past
		{" +7 ", "", 1772366400},               // spaces and a sign
		{"18446744073709551615", "", 0},        // the largest uint64
		{"99999999999999999999", "1", -1},      // overflow; a time before 1970
		{"-5", "9223372036854775807", 1 << 40}, // negative; far future
	} {
		f.Add(tt.retryAfter, tt.reset, tt.now)
	}
	rs, err := policyenvoy.Parse([]byte(`
cluster: api
retry_policy:
  retry_on: retriable-status-codes
  retriable_status_codes: [429]
  rate_limited_retry_back_off:
    reset_headers: [{name: Retry-After, format: SECONDS}, {name: X-RateLimit-Reset, format: UNIX_TIMESTAMP}]
`))
	if err != nil {
		f.Fatal(err)
	}
	classify := rs[0].Classifier
	const maxInterval = policyenvoy.DefaultRateLimitedMaxInterval
	oracle := func(retryAfter, reset string, now int64) time.Duration {
		read := func(v string) (uint64, bool) {
			v = strings.TrimPrefix(strings.TrimSpace(v), "+")
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
		if n, ok := read(retryAfter); ok && n <= uint64(maxInterval/time.Second) {
			return time.Duration(n) * time.Second
		}
		if n, ok := read(reset); ok && now >= 0 && n >= uint64(now) && n-uint64(now) <= uint64(maxInterval/time.Second) {
			return time.Duration(n-uint64(now)) * time.Second
		}
		return 0
	}
	f.Fuzz(func(t *testing.T, retryAfter, reset string, now int64) {
		h := http.Header{}
		if retryAfter != "" {
			h["Retry-After"] = []string{retryAfter}
		}
		if reset != "" {
			h["X-Ratelimit-Reset"] = []string{reset}
		}
		err := classify(&http.Response{StatusCode: 429, Header: h}, time.Unix(now, 0))
		want := oracle(retryAfter, reset, now)
		d, ok := fault.Hint(err)
		if !ok {
			if want != 0 {
				t.Fatalf("Retry-After %q, X-RateLimit-Reset %q at %d: the back-off; want a wait from %v", retryAfter, reset, now, want)
			}
			return
		}
		if want == 0 || d < want || d >= want+want/2+time.Nanosecond {
			t.Fatalf("Retry-After %q, X-RateLimit-Reset %q at %d: wait %v; want random(%v, 1.5 × %v)", retryAfter, reset, now, d, want, want)
		}
	})
}

// TestParse_ReadsEachRoutesMatch: a route's path specifier, the other matchers it sets
// and its virtual host's domains are read as written; a pasted route: block matches
// every path.
func TestParse_ReadsEachRoutesMatch(t *testing.T) {
	rs, err := policyenvoy.Parse([]byte(`virtual_hosts:
- name: v
  domains: [api.example.com, "*.example.org"]
  routes:
  - match: {prefix: /api/, headers: [{name: x-canary, present_match: true}], case_sensitive: false}
    route: {cluster: a}
  - match: {path: /health}
    route: {cluster: a}
  - match: {safe_regex: {regex: "/v[0-9]+/.*"}}
    route: {cluster: a}
`))
	require.NoError(t, err)
	require.Equal(t, policyenvoy.Match{Prefix: "/api/", Others: []string{"case_sensitive", "headers"}}, rs[0].Match)
	require.Equal(t, policyenvoy.Match{Path: "/health"}, rs[1].Match)
	require.Equal(t, policyenvoy.Match{Regex: "/v[0-9]+/.*"}, rs[2].Match)
	require.Equal(t, []string{"api.example.com", "*.example.org"}, rs[0].Domains)
	pasted := parseOne(t, "route: {cluster: a, timeout: 1s}")
	require.Equal(t, policyenvoy.Match{Prefix: "/"}, pasted.Match)
	require.Nil(t, pasted.Domains)
}
