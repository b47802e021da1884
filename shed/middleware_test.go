package shed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

// explodingBody fails the test if the shedder reads a rejected request's body.
type explodingBody struct{ t *testing.T }

func (b explodingBody) Read([]byte) (int, error) {
	b.t.Error("the shedder read a request body")
	return 0, io.EOF
}
func (explodingBody) Close() error { return nil }

// full returns a shedder with its one slot taken, and the permit to free it.
func full(t *testing.T, o shed.Options) (*shed.Shedder, shed.Permit) {
	o.Limit, o.MaxQueue = 1, -1
	s, err := shed.New(o)
	require.NoError(t, err)
	p, why := s.Admit(context.Background(), shed.PriorityCritical)
	require.Equal(t, shed.ReasonNone, why)
	return s, p
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })

func TestMiddleware_RejectsWith429RetryAfterAndProblemJSON(t *testing.T) {
	s, permit := full(t, shed.Options{Rand: pinned(0)})
	defer permit.Release()
	w := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/orders", explodingBody{t})
	shed.Middleware(okHandler, s).ServeHTTP(w, req)
	require.Equal(t, 429, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var body struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, 429, body.Status)
	require.Equal(t, "Too Many Requests", body.Title)
	require.Contains(t, body.Detail, "(limit)")

	s503, p2 := full(t, shed.Options{RejectStatus: 503})
	defer p2.Release()
	w = httptest.NewRecorder()
	shed.Middleware(okHandler, s503).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, 503, w.Code)
}

func TestMiddleware_ShedsRetriesFirstAndMarksOwnership(t *testing.T) {
	s := shed.MustNew(shed.Options{Limit: 4, MaxQueue: -1})
	var owned, attempt atomic.Int64
	block := make(chan struct{})
	h := shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if policy.Owned(r.Context()) {
			owned.Add(1)
			n, _, _ := policy.Attempt(r.Context())
			attempt.Store(int64(n))
		}
		<-block
	}), s)
	var wg sync.WaitGroup
	serve := func(hdr, val string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest("GET", "/", nil)
			if hdr != "" {
				req.Header.Set(hdr, val)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
		}()
	}
	for range 3 {
		serve("", "")
	}
	waitFor(t, func() bool { return s.InFlight() == 3 })
	// A retry finds 3 of 4 slots taken: over its 75 % share.
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(policy.HeaderAttempt, "2")
	h.ServeHTTP(w, req)
	require.Equal(t, 429, w.Code, "the retry is shed")
	require.Contains(t, w.Body.String(), "(priority)")
	// A first attempt from upstream still gets the last slot, marked as owned.
	serve(policy.HeaderAttempt, "1")
	waitFor(t, func() bool { return s.InFlight() == 4 })
	close(block)
	wg.Wait()
	require.Equal(t, int64(1), owned.Load())
	require.Equal(t, int64(1), attempt.Load())
}

// waitFor polls cond; it synchronises with handler goroutines starting, it times
// nothing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMiddleware_Quota(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := shed.MustNew(shed.Options{Clock: clock, Quota: &shed.Quota{
		Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
		Rate: 0.5, Burst: 2, // one token per 2s
	}})
	h := shed.Middleware(okHandler, s)
	do := func(client string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Client", client)
		h.ServeHTTP(w, req)
		return w
	}
	require.Equal(t, 204, do("a").Code)
	require.Equal(t, 204, do("a").Code)
	w := do("a")
	require.Equal(t, 429, w.Code, "a's burst of 2 is spent")
	require.Equal(t, "2", w.Header().Get("Retry-After"), "ceil of the time to a's next token")
	require.Equal(t, 204, do("b").Code, "b has a quota of its own")
	require.Equal(t, 204, do("").Code, "no key: no quota")
	clock.Advance(2 * time.Second)
	require.Equal(t, 204, do("a").Code)
	require.Equal(t, uint64(1), s.Stats().Rejected[shed.ReasonQuota])
}

func TestMiddleware_OpenBreakerAnswers503WithItsOpenTime(t *testing.T) {
	b := breaker.MustNew("db", breaker.Options{ConsecutiveFailures: 1, OpenTimeout: 20 * time.Second})
	_ = policy.MustWrap(b).Do(context.Background(), func(context.Context) error { return io.ErrUnexpectedEOF })
	s := shed.MustNew(shed.Options{Breaker: b})
	w := httptest.NewRecorder()
	shed.Middleware(okHandler, s).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, 503, w.Code)
	ra := w.Header().Get("Retry-After")
	require.Contains(t, []string{"19", "20"}, ra, "the breaker's remaining open time, rounded up")
	require.Equal(t, uint64(1), s.Stats().Rejected[shed.ReasonBreaker])
}

// nopWriter is a ResponseWriter that allocates nothing, to measure the reject path.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

func TestMiddleware_RejectPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	s, permit := full(t, shed.Options{})
	defer permit.Release()
	h := shed.Middleware(okHandler, s)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(policy.HeaderAttempt, "3")
	w := &nopWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); n != 0 {
		t.Errorf("a rejection allocates %v per request; want 0", n)
	}
}

// TestMiddleware_LoadAtThreeTimesCapacity sends 3× what the handler can serve over
// loopback and checks that nothing is lost, most of the capacity does useful work and
// the admitted requests stay fast. The handler serves 4 at a time, 20 ms each (200/s).
func TestMiddleware_LoadAtThreeTimesCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2-second load test")
	}
	const (
		workers  = 4
		work     = 20 * time.Millisecond
		capacity = workers * int(time.Second/work) // 200/s
		rate     = 3 * capacity                    // 600/s
		duration = 2 * time.Second
	)
	sem := make(chan struct{}, workers)
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sem <- struct{}{}
		time.Sleep(work) // the simulated work itself
		<-sem
		w.WriteHeader(200)
	})
	s, err := shed.New(shed.Options{InitialLimit: 8, MinLimit: 4, MaxLimit: 64, Window: 100 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(shed.Middleware(handler, s))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var sent, served, rejected, failed atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	stop := time.After(duration)
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-tick.C:
		}
		sent.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res, err := client.Get(srv.URL)
			if err != nil {
				failed.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			switch res.StatusCode {
			case 200:
				served.Add(1)
				mu.Lock()
				latencies = append(latencies, time.Since(start))
				mu.Unlock()
			case 429:
				rejected.Add(1)
			default:
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("sent %d, served %d, rejected %d, failed %d, limit %d", sent.Load(), served.Load(), rejected.Load(), failed.Load(), s.Limit())
	require.Zero(t, failed.Load(), "requests lost or failed")
	require.Equal(t, sent.Load(), served.Load()+rejected.Load(), "every request served or answered")
	st := s.Stats()
	require.Equal(t, uint64(served.Load()), st.Admitted)
	goodput := float64(served.Load()) / duration.Seconds()
	require.GreaterOrEqual(t, goodput, 0.8*float64(capacity), "goodput %.0f/s of a %d/s capacity", goodput, capacity)
	var worst time.Duration
	for _, l := range latencies {
		worst = max(worst, l)
	}
	require.Less(t, worst, time.Second, "admitted requests are bounded: worst %v", worst)
}

// TestCurlHonoursRetryAfter checks a real client against the shedder: curl --retry
// waits the Retry-After we send before it retries.
func TestCurlHonoursRetryAfter(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	s := shed.MustNew(shed.Options{Quota: &shed.Quota{Key: func(*http.Request) string { return "all" }, Rate: 1, Burst: 1}})
	var mu sync.Mutex
	var arrivals []time.Time
	var codes []int
	var h http.Handler = shed.Middleware(okHandler, s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		codes = append(codes, rec.code)
		mu.Unlock()
	}))
	defer srv.Close()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // spend the token

	out, err := exec.Command(curl, "--silent", "--retry", "3", "--output", t.TempDir()+"/body",
		"--write-out", "%{http_code}", srv.URL).CombinedOutput()
	require.NoError(t, err, "curl: %s", out)
	require.Equal(t, "204", strings.TrimSpace(string(out)), "curl's final status")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{429, 204}, codes)
	gap := arrivals[1].Sub(arrivals[0])
	require.GreaterOrEqual(t, gap, 900*time.Millisecond, "curl retried after %v; Retry-After said 1s", gap)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func BenchmarkMiddleware_Admit(b *testing.B) {
	s := shed.MustNew(shed.Options{})
	serveParallel(b, shed.Middleware(okHandler, s))
}

func BenchmarkMiddleware_Reject(b *testing.B) {
	s := shed.MustNew(shed.Options{Limit: 1, MaxQueue: -1})
	p, _ := s.Admit(context.Background(), shed.PriorityCritical)
	defer p.Release()
	serveParallel(b, shed.Middleware(okHandler, s))
}

func BenchmarkBareHandler(b *testing.B) { serveParallel(b, okHandler) }

func serveParallel(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/", nil)
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}
