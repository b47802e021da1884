package policyenvoy_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policyhttp"
)

// counting counts the requests a transport was given.
type counting struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestClassifier_NetworkFailuresAsEnvoy: the retry_on conditions on a refused
// connection and on a connection reset after the request was sent, against real
// loopback sockets, as Envoy's router decides them: gateway-error counts a reset as a
// 5xx; reset-before-request retries what never reached the upstream (a refused
// connection), not a reset that may follow the request; refused-stream is HTTP/2's
// REFUSED_STREAM only.
func TestClassifier_NetworkFailuresAsEnvoy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	rst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
		c.Close()
	}))
	defer rst.Close()

	for _, tt := range []struct {
		retryOn, url string
		attempts     int
	}{
		{"gateway-error", rst.URL, 3},
		{"gateway-error", refused, 3},
		{"reset-before-request", refused, 3},
		{"reset-before-request", rst.URL, 1},
		{"refused-stream", rst.URL, 1},
		{"connect-failure", rst.URL, 1},
		{"connect-failure", refused, 3},
		{"reset", rst.URL, 3},
		{"5xx", rst.URL, 3},
		{"retriable-4xx", refused, 1},
	} {
		name := tt.retryOn + " on a refused connection"
		if tt.url == rst.URL {
			name = tt.retryOn + " on a reset"
		}
		t.Run(name, func(t *testing.T) {
			r := parseOne(t, `{"cluster": "api", "timeout": "5s", "retry_policy": {"retry_on": "`+tt.retryOn+`", "num_retries": 2,
				"retry_back_off": {"base_interval": "0.001s"}}}`)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &counting{next: tr}
			client := &http.Client{Transport: policyhttp.NewTransport(c, r.Pipeline, policyhttp.Options{Classifier: r.Classifier})}
			res, err := client.Get(tt.url)
			if err == nil {
				res.Body.Close()
			}
			require.Error(t, err)
			require.Equal(t, int64(tt.attempts), c.n.Load(), "%v", err)
		})
	}
}

// TestParse_PerTryTimeoutNotBelowTheTimeoutIsIgnored: Envoy ignores a per_try_timeout
// that is not below the route's timeout; so does the route's pipeline, whose retries
// then each get what is left of the timeout.
func TestParse_PerTryTimeoutNotBelowTheTimeoutIsIgnored(t *testing.T) {
	for _, tt := range []struct {
		perTry       string
		want, ignore time.Duration
	}{
		{"0.5s", 500 * time.Millisecond, 0},
		{"1s", 0, time.Second},
		{"5s", 0, 5 * time.Second},
	} {
		r := parseOne(t, `{"cluster": "api", "timeout": "1s", "retry_policy": {"retry_on": "reset", "num_retries": 3, "per_try_timeout": "`+tt.perTry+`"}}`)
		require.Equal(t, tt.want, r.PerTryTimeout, tt.perTry)
		require.Equal(t, tt.ignore, r.IgnoredPerTryTimeout, tt.perTry)
		require.Equal(t, 4, r.Pipeline.Explain().MaxAttempts, tt.perTry)
	}
}

// TestParse_MaxIntervalBelowBaseIsPlaced: Envoy refuses a max_interval below the
// base_interval; the error names the field and sits at it in the input.
func TestParse_MaxIntervalBelowBaseIsPlaced(t *testing.T) {
	const src = `virtual_hosts:
- name: api
  domains: ["*"]
  routes:
  - match: {prefix: "/"}
    route:
      cluster: api
      retry_policy:
        retry_on: 5xx
        retry_back_off:
          base_interval: 2s
          max_interval: 1s
`
	_, err := policyenvoy.Parse([]byte(src))
	var ce *policyenvoy.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 12, ce.Line, "%v", err)
	require.Equal(t, "virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval", ce.Path)
	require.Contains(t, ce.Msg, "max_interval 1s is below base_interval 2s")
}
