package policyhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	contentLength int64
	chunked       bool
	key           string
	body          string
}

// droppingServer is an HTTP/1.1 server on 127.0.0.1 with keep-alive. It counts the
// requests of each call (the X-Call header) that reach its handler. It answers
// /warm once as many warming requests have arrived together as it was told to
// expect, so that as many connections stand idle in the client's pool. Every
// other request is read in full and then dropped unanswered: the handler hijacks
// the connection and resets it, as a server that crashes after reading does.
type droppingServer struct {
	*httptest.Server
	warmers sync.WaitGroup

	mu       sync.Mutex
	arrivals map[string][]arrival
}

func newDroppingServer(t *testing.T, warm int) *droppingServer {
	t.Helper()
	s := &droppingServer{arrivals: map[string][]arrival{}}
	s.warmers.Add(warm)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			contentLength: r.ContentLength,
			chunked:       len(r.TransferEncoding) > 0,
			key:           r.Header.Get(policyhttp.HeaderIdempotencyKey),
			body:          string(b),
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
	t.Cleanup(s.Close)
	return s
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
	}{
		{name: "GET", method: http.MethodGet, maxAttempts: 3},
		{name: "GET, one attempt", method: http.MethodGet, maxAttempts: 1},
		{name: "GET under an upstream owner", method: http.MethodGet, maxAttempts: 3, upstream: true},
		{name: "HEAD", method: http.MethodHead, maxAttempts: 3},
		{name: "POST with an Idempotency-Key", method: http.MethodPost, key: "k-1", maxAttempts: 3},
		{name: "POST with a body and an Idempotency-Key", method: http.MethodPost, body: `{"amount": 10}`, key: "k-2", maxAttempts: 3},
		{name: "PUT with a body", method: http.MethodPut, body: "x", maxAttempts: 3},
		{name: "GET with a body", method: http.MethodGet, body: "q", maxAttempts: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newDroppingServer(t, idle)
			base := &http.Transport{MaxIdleConnsPerHost: idle}
			t.Cleanup(base.CloseIdleConnections)
			srv.warm(t, base, idle)

			clock := policytest.NewClock(t0).AutoAdvance(true)
			p := policy.MustWrap(retry.MustNew(retry.Options{MaxAttempts: tt.maxAttempts, Clock: clock, Rand: zeroRand{}}))
			client := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{})}

			ctx := context.Background()
			want := tt.maxAttempts
			if tt.upstream {
				ctx = callpath.WithUpstreamAttempt(ctx, 2)
				want = 1
			}
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, srv.URL, body)
			require.NoError(t, err)
			req.Header.Set("X-Call", tt.name)
			if tt.key != "" {
				req.Header.Set(policyhttp.HeaderIdempotencyKey, tt.key)
			}
			res, err := client.Do(req)
			if err == nil {
				res.Body.Close()
				t.Fatalf("%s: got %s, want an error: the server answers nothing", tt.name, res.Status)
			}

			got := srv.of(tt.name)
			require.LessOrEqual(t, len(got), want, "%s with MaxAttempts %d: arrivals at the server", tt.name, tt.maxAttempts)
			require.Len(t, got, want, "%s: each attempt reaches the server once (the error was %v)", tt.name, err)
			for i, a := range got {
				// What is sent is what a plain net/http client sends.
				require.Equal(t, int64(len(tt.body)), a.contentLength, "arrival %d: Content-Length", i+1)
				require.False(t, a.chunked, "arrival %d: chunked", i+1)
				require.Equal(t, tt.key, a.key, "arrival %d: Idempotency-Key", i+1)
				require.Equal(t, tt.body, a.body, "arrival %d: body", i+1)
			}
		})
	}
}
