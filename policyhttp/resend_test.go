package policyhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// arrival is what a dropping server saw of one request.
type arrival struct {
	contentLength string // the header, "" if absent
	chunked       bool
	key           string
	body          string
	attempt       string // Backstop-Attempt
}

// droppingServer is an HTTP/1.1 server on 127.0.0.1 with keep-alive. It counts the
// requests of each call (the X-Call header) that reach its handler. It answers
// /warm once as many warming requests have arrived together as it was told to
// expect, so that as many connections stand idle in the client's pool. Every
// other request is read in full and then dropped unanswered: the handler hijacks
// the connection and resets it, as a server that crashes after reading does. It also
// counts the times a connection turned active after the warming, that is the
// requests of which any byte arrived, whole or not.
type droppingServer struct {
	*httptest.Server
	warmers sync.WaitGroup

	mu       sync.Mutex
	arrivals map[string][]arrival
	warmed   bool
	active   int
}

func newDroppingServer(t *testing.T, warm int) *droppingServer {
	t.Helper()
	s := &droppingServer{arrivals: map[string][]arrival{}}
	s.warmers.Add(warm)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			s.warmers.Done()
			s.warmers.Wait() // all warming connections are open at once
			io.WriteString(w, "warm")
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server: reading the body of call %s: %v", r.Header.Get("X-Call"), err)
		}
		s.mu.Lock()
		call := r.Header.Get("X-Call")
		s.arrivals[call] = append(s.arrivals[call], arrival{
			contentLength: r.Header.Get("Content-Length"),
			chunked:       len(r.TransferEncoding) > 0,
			key:           r.Header.Get(policyhttp.HeaderIdempotencyKey),
			body:          string(b),
			attempt:       r.Header.Get(callpath.HeaderAttempt),
		})
		s.mu.Unlock()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("server: hijack: %v", err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close with a reset: the client reads ECONNRESET
		conn.Close()
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		s.mu.Lock()
		if s.warmed && state == http.StateActive {
			s.active++
		}
		s.mu.Unlock()
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// requestsStarted returns how many requests of which any byte arrived after the
// warming.
func (s *droppingServer) requestsStarted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *droppingServer) of(call string) []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals[call]
}

// warm makes n requests at once and reads each response to its end, so n
// connections stand idle in base's pool when it returns (net/http returns a body's
// end only once its connection is back in the pool).
func (s *droppingServer) warm(t *testing.T, base http.RoundTripper, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodGet, s.URL+"/warm", nil)
			if err != nil {
				t.Error(err)
				return
			}
			res, err := base.RoundTrip(req)
			if err != nil {
				t.Errorf("warming: %v", err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		})
	}
	wg.Wait()
	s.mu.Lock()
	s.warmed = true
	s.mu.Unlock()
}

// TestTransport_ACallReachesTheServerAtMostMaxAttemptsTimes: net/http's Transport
// sends an idempotent request again on a new connection when a reused one fails
// before any response. Beneath a pipeline that owns the retries, a call must reach
// the server no more often than the pipeline's MaxAttempts, those resends included.
// The server reads every request and resets its connection; two connections stand
// idle in the pool when each call starts, so net/http would resend on both.
func TestTransport_ACallReachesTheServerAtMostMaxAttemptsTimes(t *testing.T) {
	const idle = 2
	for _, tt := range []struct {
		name        string
		method      string
		body        string // sent with GetBody set
		key         string
		maxAttempts int
		upstream    bool // the call runs under an owner in another process: one attempt
		hedge       bool // the attempts start at once, under a hedge
		expect      bool // the request says Expect: 100-continue
		stacked     bool // a transport with a pipeline of its own stands beneath
	}{
		{name: "GET", method: http.MethodGet, maxAttempts: 3},
		{name: "GET, one attempt", method: http.MethodGet, maxAttempts: 1},
		{name: "GET under an upstream owner", method: http.MethodGet, maxAttempts: 3, upstream: true},
		{name: "HEAD", method: http.MethodHead, maxAttempts: 3},
		{name: "GET expecting 100-continue", method: http.MethodGet, maxAttempts: 2, expect: true},
		{name: "POST with an Idempotency-Key", method: http.MethodPost, key: "k-1", maxAttempts: 3},
		{name: "POST with a body and an Idempotency-Key", method: http.MethodPost, body: `{"amount": 10}`, key: "k-2", maxAttempts: 3},
		{name: "PUT with a body", method: http.MethodPut, body: "x", maxAttempts: 3},
		{name: "GET with a body", method: http.MethodGet, body: "q", maxAttempts: 2},
		{name: "GET, hedged", method: http.MethodGet, maxAttempts: 3, hedge: true},
		{name: "GET through stacked transports", method: http.MethodGet, maxAttempts: 3, stacked: true},
		{name: "POST with a body and an Idempotency-Key, hedged", method: http.MethodPost, body: "y", key: "k-3", maxAttempts: 2, hedge: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newDroppingServer(t, idle)
			base := &http.Transport{MaxIdleConnsPerHost: idle}
			t.Cleanup(base.CloseIdleConnections)
			srv.warm(t, base, idle)

			clock := policytest.NewClock(t0).AutoAdvance(true)
			p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: tt.maxAttempts, Clock: clock, Rand: zeroRand{}}))))
			if tt.hedge {
				p = policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: tt.maxAttempts, Delay: -1, Clock: clock}))))
			}
			var next http.RoundTripper = base
			if tt.stacked {
				// Its retry stands under the owner above: one attempt each.
				inner := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: zeroRand{}}))))
				next = policyhttp.NewTransport(base, inner, policyhttp.Options{})
			}
			client := &http.Client{Transport: policyhttp.NewTransport(next, p, policyhttp.Options{})}

			ctx := context.Background()
			want := tt.maxAttempts
			if tt.upstream {
				ctx = callpath.WithUpstreamAttempt(ctx, 2)
				want = 1
			}
			request := func(ctx context.Context, call string) *http.Request {
				var body io.Reader
				if tt.body != "" {
					body = strings.NewReader(tt.body)
				}
				req, err := http.NewRequestWithContext(ctx, tt.method, srv.URL, body)
				require.NoError(t, err)
				req.Header.Set("X-Call", call)
				if tt.key != "" {
					req.Header.Set(policyhttp.HeaderIdempotencyKey, tt.key)
				}
				if tt.expect {
					req.Header.Set("Expect", "100-continue")
				}
				return req
			}
			req := request(ctx, tt.name)
			res, err := client.Do(req)
			if err == nil {
				res.Body.Close()
				t.Fatalf("%s: got %s, want an error: the server answers nothing", tt.name, res.Status)
			}

			if want == 1 {
				// The one attempt went out on a reused connection: net/http would resend it.
				require.ErrorIs(t, err, policyhttp.ErrResendRefused, "%s: the error", tt.name)
			}
			got := srv.of(tt.name)
			require.LessOrEqual(t, len(got), want, "%s with MaxAttempts %d: arrivals at the server", tt.name, tt.maxAttempts)
			require.Len(t, got, want, "%s: each attempt reaches the server once (the error was %v)", tt.name, err)
			require.Equal(t, len(got), srv.requestsStarted(), "%s: requests of which a byte reached the server", tt.name)

			// What is sent is what a plain net/http client sends.
			plain, err := base.RoundTrip(request(context.Background(), "plain"))
			if err == nil {
				plain.Body.Close()
			}
			control := srv.of("plain")[0]
			var numbers []string
			for i, a := range got {
				numbers = append(numbers, a.attempt)
				a.attempt = ""
				require.Equal(t, control, a, "arrival %d: the request as net/http sends it", i+1)
			}
			// Each arrival is an attempt of the pipeline, numbered as one.
			slices.Sort(numbers)
			wantNumbers := []string{"1", "2", "3"}[:want]
			if tt.maxAttempts == 1 {
				wantNumbers = []string{""} // a retry of one attempt owns nothing
			}
			require.Equal(t, wantNumbers, numbers, "%s: Backstop-Attempt of the arrivals", tt.name)
		})
	}
}

// TestTransport_CallsTheCallersTraceHooks: the guard's trace composes with the
// caller's own httptrace hooks, GotConn among them.
func TestTransport_CallsTheCallersTraceHooks(t *testing.T) {
	srv := newServer(t, status(200))
	r := newRig(t, 3)
	var conns, wrote int
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { conns++ },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote++ },
	}
	for range 2 {
		req := get(t, srv.URL).WithContext(httptrace.WithClientTrace(context.Background(), trace))
		res := r.do(t, req)
		io.Copy(io.Discard, res.Body)
	}
	require.Equal(t, 2, conns, "the caller's GotConn: calls")
	require.Equal(t, 2, wrote, "the caller's WroteRequest: calls")
}

// TestTransport_GuardLetsHTTP2Through: over HTTP/2 (TLS with ALPN) a guarded request
// goes out once and succeeds, its Idempotency-Key on it.
func TestTransport_GuardLetsHTTP2Through(t *testing.T) {
	var mu sync.Mutex
	var protos, keys []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		keys = append(keys, r.Header.Get(policyhttp.HeaderIdempotencyKey))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := srv.Client().Transport
	t.Cleanup(base.(*http.Transport).CloseIdleConnections)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: zeroRand{}}))))
	client := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{})}
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("z"))
		require.NoError(t, err)
		req.Header.Set(policyhttp.HeaderIdempotencyKey, "k-h2")
		res, err := client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, "ok", string(b))
	}
	require.Equal(t, []string{"HTTP/2.0", "HTTP/2.0"}, protos, "the requests' protocol")
	require.Equal(t, []string{"k-h2", "k-h2"}, keys, "the requests' Idempotency-Key")
}
