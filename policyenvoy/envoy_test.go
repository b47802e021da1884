package policyenvoy_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

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
	require.Equal(t, "prefix /api: deadline → retry → attempt-timeout", r.Pipeline.String())
	e := r.Explain()
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, 3*time.Second, e.WorstCase, "3 × 1 s + back-off is more than 3 s: the route timeout bounds it")
}

// TestParse_EnvoysDefaults: a retry_policy with only retry_on takes Envoy's documented
// defaults: one retry, back-off from 25 ms to 250 ms, and the route's 15 s timeout.
func TestParse_EnvoysDefaults(t *testing.T) {
	r := parseOne(t, `{"cluster": "api", "retry_policy": {"retry_on": "5xx"}}`)
	require.Equal(t, policyenvoy.DefaultRouteTimeout, r.Timeout)
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
		"retry_policy.retry_on made-up",
		"retry_policy.retry_on retriable-headers",
		"retry_policy.retry_on unavailable (a gRPC condition: use policygrpc on gRPC routes)",
	}, r.Unsupported)
}

func TestParse_RefusesInvalidConfigs(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"cluster: api\nretry_policy: {retry_back_off: {base_interval: 0s}}", "BaseInterval"},
		{"cluster: [unclosed", "yaml"},
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

// roundTrip sends one GET through the route's pipeline and classifier to a server
// answering with answer(n), and returns the server's request count and the status.
func roundTrip(t *testing.T, r *policyenvoy.Route, answer func(w http.ResponseWriter, n int)) (int, int) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w, int(n.Add(1))) }))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(tr, r.Pipeline, policyhttp.WithClassifier(r.Classifier))}
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

// TestClassifier_ResetHeaders: rate_limited_retry_back_off reads a reset header in
// seconds or as a Unix timestamp, and caps it at max_interval.
func TestClassifier_ResetHeaders(t *testing.T) {
	r := parseOne(t, `
cluster: api
retry_policy:
  retry_on: retriable-status-codes
  retriable_status_codes: [429]
  rate_limited_retry_back_off:
    reset_headers: [{name: Retry-After, format: SECONDS}, {name: X-RateLimit-Reset, format: UNIX_TIMESTAMP}]
    max_interval: 2s
`)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	res := func(hdr ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		return &http.Response{StatusCode: 429, Status: "429 Too Many Requests", Header: h}
	}
	for _, tt := range []struct {
		hdr  []string
		want time.Duration
	}{
		{[]string{"Retry-After", "1"}, time.Second},
		{[]string{"Retry-After", "100"}, 2 * time.Second},                                                          // capped
		{[]string{"X-RateLimit-Reset", strconv.FormatInt(now.Add(1500*time.Millisecond).Unix(), 10)}, time.Second}, // whole seconds
		{[]string{"X-RateLimit-Reset", strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}, 0},                      // past
	} {
		err := r.Classifier(res(tt.hdr...), now)
		d, ok := retry.Hint(err)
		require.True(t, ok, "%v: %v carries a delay", tt.hdr, err)
		require.Equal(t, tt.want, d, "%v", tt.hdr)
	}
	_, ok := retry.Hint(r.Classifier(res(), now))
	require.False(t, ok, "no reset header: Envoy's back-off")
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

// FuzzParse: any input either fails with ErrInvalid or gives routes with a pipeline
// and a classifier.
func FuzzParse(f *testing.F) {
	src, _ := os.ReadFile("testdata/route.yaml")
	for _, s := range []string{string(src), `{"cluster": "a"}`, `{"cluster": "a", "retry_policy": {"retry_on": "5xx", "num_retries": 4294967295}}`,
		"routes: []\ndomains: ['*']\nname: v", `{"match": {"prefix": "/"}, "route": {"cluster": "a", "timeout": "315576000000s"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := policyenvoy.Parse([]byte(s))
		if err != nil {
			if !errors.Is(err, policyenvoy.ErrInvalid) {
				t.Fatalf("Parse(%q) = %v; want ErrInvalid", s, err)
			}
			return
		}
		for _, r := range rs {
			if r.Pipeline == nil || r.Classifier == nil {
				t.Fatalf("Parse(%q): route %q without a pipeline or classifier", s, r.Name)
			}
			_ = r.Explain().String()
		}
	})
}
