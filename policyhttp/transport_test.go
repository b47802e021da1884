package policyhttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is a whole second, so HTTP-dates (1 s resolution) are exact.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// server is an httptest server on 127.0.0.1 that records every request it gets.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func newServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, string(b))
		n := len(s.reqs)
		s.mu.Unlock()
		h(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *server) header(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vs []string
	for _, r := range s.reqs {
		vs = append(vs, r.Header.Get(name))
	}
	return vs
}

// status answers with code on every request.
func status(code int, hdr ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

// rig is a client whose transport runs a retrying pipeline on a fake clock. The
// transport has a clock of its own, manual, reading the same time when a first
// response arrives: its drain timers never fire unless a test moves it, and they are
// not among the retry's waits.
type rig struct {
	client *http.Client
	clock  *policytest.Clock // the retry's, auto-advancing
	drains *policytest.Clock // the transport's, manual
	bodies *policytest.Bodies
}

func newRig(t *testing.T, maxAttempts int, o ...policyhttp.Options) *rig {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: maxAttempts, Clock: clock, Rand: zeroRand{}}))))
	bodies := &policytest.Bodies{Next: base}
	drains := policytest.NewClock(t0)
	var opts policyhttp.Options
	if len(o) > 0 {
		opts = o[0]
	}
	opts.Clock = drains
	return &rig{client: &http.Client{Transport: policyhttp.NewTransport(bodies, p, opts)}, clock: clock, drains: drains, bodies: bodies}
}

type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }

func (r *rig) do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	res, err := r.client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func get(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	return req
}

func TestTransport_RetriesRetryableStatuses(t *testing.T) {
	for _, code := range []int{408, 429, 502, 503, 504} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := newServer(t, status(code))
			r := newRig(t, 3)
			res := r.do(t, get(t, srv.URL))
			require.Equal(t, code, res.StatusCode, "the last response is returned when the pipeline gives up")
			body, _ := io.ReadAll(res.Body)
			require.Equal(t, fmt.Sprintf("status %d", code), string(body), "and its body is readable")
			require.Equal(t, 3, srv.count(), "requests sent")
		})
	}
}

func TestTransport_DoesNotRetryOtherFailures(t *testing.T) {
	for _, code := range []int{400, 404, 500, 501} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := newServer(t, status(code))
			r := newRig(t, 3)
			res := r.do(t, get(t, srv.URL))
			require.Equal(t, code, res.StatusCode)
			require.Equal(t, 1, srv.count(), "a %d is not retried", code)
		})
	}
}

func TestTransport_RetryAfterSecondsAndDate(t *testing.T) {
	tests := []struct {
		name, value string
		want        time.Duration
	}{
		{"delay-seconds", "7", 7 * time.Second},
		{"HTTP-date", t0.Add(4 * time.Second).Format(http.TimeFormat), 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 1 {
					w.Header().Set("Retry-After", tt.value)
					w.WriteHeader(503)
					return
				}
				w.WriteHeader(200)
			})
			r := newRig(t, 3)
			res := r.do(t, get(t, srv.URL))
			require.Equal(t, 200, res.StatusCode)
			require.Equal(t, 2, srv.count())
			require.Equal(t, []time.Duration{tt.want}, r.clock.Waits(), "the retry waited the server's Retry-After")
		})
	}
}

func TestTransport_Idempotency(t *testing.T) {
	post := func(t *testing.T, url string, key string) *http.Request {
		req, err := http.NewRequest("POST", url, strings.NewReader(`{"amount": 10}`))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set(policyhttp.HeaderIdempotencyKey, key)
		}
		return req
	}
	t.Run("POST without a key: one attempt", func(t *testing.T) {
		srv := newServer(t, status(503))
		r := newRig(t, 3)
		res := r.do(t, post(t, srv.URL, ""))
		require.Equal(t, 503, res.StatusCode)
		require.Equal(t, 1, srv.count())
	})
	t.Run("POST with a key: retried, same key and body each time", func(t *testing.T) {
		srv := newServer(t, status(503))
		r := newRig(t, 3)
		r.do(t, post(t, srv.URL, "k-123"))
		require.Equal(t, []string{"k-123", "k-123", "k-123"}, srv.header(policyhttp.HeaderIdempotencyKey))
		require.Equal(t, []string{`{"amount": 10}`, `{"amount": 10}`, `{"amount": 10}`}, srv.body, "the body is rewound for every attempt")
	})
	t.Run("generated keys", func(t *testing.T) {
		srv := newServer(t, status(503))
		n := 0
		r := newRig(t, 2, policyhttp.Options{IdempotencyKeys: true, NewKey: func() string { n++; return fmt.Sprint("gen-", n) }})
		r.do(t, post(t, srv.URL, ""))
		require.Equal(t, []string{"gen-1", "gen-1"}, srv.header(policyhttp.HeaderIdempotencyKey))
		r.do(t, get(t, srv.URL))
		require.Equal(t, []string{"gen-1", "gen-1", "", ""}, srv.header(policyhttp.HeaderIdempotencyKey), "GETs get no key")
	})
	t.Run("random generated keys", func(t *testing.T) {
		srv := newServer(t, status(503))
		r := newRig(t, 2, policyhttp.Options{IdempotencyKeys: true})
		r.do(t, post(t, srv.URL, ""))
		keys := srv.header(policyhttp.HeaderIdempotencyKey)
		require.Len(t, keys[0], 32)
		require.Equal(t, keys[0], keys[1])
	})
	t.Run("a body without GetBody: one attempt", func(t *testing.T) {
		srv := newServer(t, status(503))
		r := newRig(t, 3)
		req, err := http.NewRequest("PUT", srv.URL, io.NopCloser(strings.NewReader("x")))
		require.NoError(t, err)
		require.Nil(t, req.GetBody)
		r.do(t, req)
		require.Equal(t, 1, srv.count())
	})
	t.Run("PUT with a rewindable body: retried", func(t *testing.T) {
		srv := newServer(t, status(503))
		r := newRig(t, 3)
		req, err := http.NewRequest("PUT", srv.URL, bytes.NewReader([]byte("x")))
		require.NoError(t, err)
		r.do(t, req)
		require.Equal(t, []string{"x", "x", "x"}, srv.body)
	})
}

func TestTransport_ClosesDiscardedBodies(t *testing.T) {
	srv := newServer(t, status(503))
	r := newRig(t, 4)
	res := r.do(t, get(t, srv.URL))
	require.Equal(t, int64(4), r.bodies.Opened())
	require.Equal(t, int64(3), r.bodies.Closed(), "the 3 discarded attempts' bodies are closed")
	res.Body.Close()
	require.Equal(t, int64(4), r.bodies.Closed())
}

func TestTransport_AttemptHeaderAndCallerRequestUntouched(t *testing.T) {
	srv := newServer(t, status(503))
	r := newRig(t, 3)
	req := get(t, srv.URL)
	req.Header.Set("X-Mine", "1")
	r.do(t, req)
	require.Equal(t, []string{"1", "2", "3"}, srv.header(callpath.HeaderAttempt))
	require.Equal(t, http.Header{"X-Mine": {"1"}}, req.Header, "the caller's request is not modified")
}

func TestTransport_NoPipelineRetryNoAttemptHeader(t *testing.T) {
	srv := newServer(t, status(200))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(base, policy.Must(policy.Wrap()), policyhttp.Options{})}
	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, []string{""}, srv.header(callpath.HeaderAttempt), "no retry owner, no header")
}

func TestTransport_OpenBreakerSendsNothing(t *testing.T) {
	srv := newServer(t, status(200))
	b, err := breaker.New(breaker.Options{Name: "api"})
	require.NoError(t, err)
	b.ForceOpen()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(base, policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{})))), policyhttp.Options{})}
	closes := new(atomic.Int64)
	body := policytest.CountCloses(io.NopCloser(strings.NewReader("x")), closes)
	req, _ := http.NewRequest("PUT", srv.URL, body)
	_, err = c.Do(req)
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.ErrorIs(t, err, policy.ErrRejected)
	require.Zero(t, srv.count(), "no request sent")
	require.Equal(t, int64(1), closes.Load(), "the request body is closed all the same")
}

func TestTransport_BreakerCountsServerFailuresNotClientFaults(t *testing.T) {
	b := policy.Must(breaker.New(breaker.Options{Name: "api", ConsecutiveFailures: 2}))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(base, policy.Must(policy.Wrap(b)), policyhttp.Options{})}
	for _, code := range []int{404, 429, 400, 404} {
		res, err := c.Get(newServer(t, status(code)).URL)
		require.NoError(t, err)
		res.Body.Close()
	}
	require.Equal(t, breaker.StateClosed, b.State(), "4xx say nothing about the server's health")
	for range 2 {
		res, err := c.Get(newServer(t, status(500)).URL)
		require.NoError(t, err)
		res.Body.Close()
	}
	require.Equal(t, breaker.StateOpen, b.State())
}

func TestTransport_CallerCancellationIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		cancel()
		w.WriteHeader(503)
	})
	r := newRig(t, 3)
	req := get(t, srv.URL).WithContext(ctx)
	res, err := r.client.Do(req)
	if res != nil {
		res.Body.Close()
	}
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, srv.count())
}

func TestDefaultClassifier(t *testing.T) {
	res := func(code int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: code, Status: fmt.Sprint(code, " ", http.StatusText(code)), Header: h}
	}
	tests := []struct {
		code       int
		retryAfter string
		retried    bool
		excluded   bool // from breaker counts
		hint       time.Duration
	}{
		{200, "", false, false, 0},
		{304, "", false, false, 0},
		{400, "", false, true, 0},
		{404, "", false, true, 0},
		{408, "", true, true, 0},
		{429, "3", true, true, 3 * time.Second},
		{500, "", false, false, 0},
		{502, "", true, false, 0},
		{503, "", true, false, 0},
		{503, "120", true, false, 2 * time.Minute},
		{503, "garbage", true, false, 0},
		{504, "", true, false, 0},
	}
	for _, tt := range tests {
		err := policyhttp.DefaultClassifier(res(tt.code, tt.retryAfter), t0)
		if tt.code < 400 {
			require.NoError(t, err, "status %d", tt.code)
			continue
		}
		var se *policyhttp.StatusError
		require.ErrorAs(t, err, &se, "status %d", tt.code)
		require.Equal(t, tt.code, se.StatusCode)
		require.Equal(t, tt.retried, retry.DefaultShouldRetry(err), "status %d retried", tt.code)
		require.Equal(t, tt.excluded, breaker.DefaultIsExcluded(err), "status %d excluded from the breaker", tt.code)
		hint, _ := fault.Hint(err)
		require.Equal(t, tt.hint, hint, "status %d hint", tt.code)
	}
	require.Equal(t, "policyhttp: 503 Service Unavailable", (&policyhttp.StatusError{StatusCode: 503, Status: "503 Service Unavailable"}).Error())
}

// TestMiddleware_MarksOwnedUpstream: the attempt headers of Backstop, Envoy and gRPC
// mark the handler's context; garbage is ignored.
func TestMiddleware_MarksOwnedUpstream(t *testing.T) {
	tests := []struct {
		header, value string
		attempt       int
		owned         bool
	}{
		{"", "", 0, false},
		{callpath.HeaderAttempt, "2", 2, true},
		{callpath.HeaderEnvoyAttempt, "1", 1, true},
		{callpath.HeaderGRPCPreviousAttempts, "1", 2, true},
		{callpath.HeaderAttempt, "two", 0, false},
		{callpath.HeaderAttempt, strings.Repeat("9", 5000), callpath.MaxAttempt, true},
	}
	for _, tt := range tests {
		var owned bool
		var n int
		h := policyhttp.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			owned = callpath.Owned(r.Context())
			n, _, _ = callpath.Attempt(r.Context())
		}))
		req := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			req.Header.Set(tt.header, tt.value)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if owned != tt.owned || n != tt.attempt {
			t.Errorf("Middleware with %s: %.20q: owned %v, attempt %d; want %v, %d", tt.header, tt.value, owned, n, tt.owned, tt.attempt)
		}
	}
}

// TestTransport_BreakerInsideRetryReturnsTheLastResponse: with the breaker counting
// attempts, the attempt it refuses sends nothing, and the caller gets the last
// response received, with a nil error.
func TestTransport_BreakerInsideRetryReturnsTheLastResponse(t *testing.T) {
	srv := newServer(t, status(503))
	b := policy.Must(breaker.New(breaker.Options{Name: "api", ConsecutiveFailures: 2}))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Clock: clock})), b))
	c := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{})}
	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, 503, res.StatusCode)
	require.Equal(t, 2, srv.count(), "the third attempt was refused by the open breaker")
	body, _ := io.ReadAll(res.Body)
	require.Equal(t, "status 503", string(body))
}

func TestTransport_MaxDrain(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(503)
		_, _ = io.WriteString(w, big)
	})
	r := newRig(t, 2, policyhttp.Options{MaxDrain: -1})
	res := r.do(t, get(t, srv.URL))
	require.Equal(t, 503, res.StatusCode)
	require.Equal(t, int64(1), r.bodies.Closed(), "the discarded body is closed without being read")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransport_NilHeaderGetsAttempt: a request without a Header (RoundTrip called
// directly: http.Client fills one in) still goes out with its attempt header under a
// retry owner, and the caller's request keeps its nil Header.
func TestTransport_NilHeaderGetsAttempt(t *testing.T) {
	var got []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get(callpath.HeaderAttempt))
		code := http.StatusServiceUnavailable
		if len(got) == 2 {
			code = http.StatusOK
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Clock: clock, Rand: zeroRand{}}))))
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: "example.com", Path: "/"}}
	res, err := policyhttp.NewTransport(base, p, policyhttp.Options{Clock: clock}).RoundTrip(req.WithContext(context.Background()))
	require.NoError(t, err)
	res.Body.Close()
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("RoundTrip of a request with a nil Header: attempt headers %q; want [1 2]", got)
	}
	if req.Header != nil {
		t.Errorf("RoundTrip set the caller's Header to %v; want it nil", req.Header)
	}
}
