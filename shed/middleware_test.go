package shed_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
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
	o.Limit.Fixed, o.Queue.Max = 1, -1
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

	s503, p2 := full(t, shed.Options{Refusal: shed.RefusalOptions{Status: 503}})
	defer p2.Release()
	w = httptest.NewRecorder()
	shed.Middleware(okHandler, s503).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, 503, w.Code)
}

func TestMiddleware_ShedsRetriesFirstAndMarksOwnership(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 4}, Queue: shed.QueueOptions{Max: -1}}))
	var owned, attempt atomic.Int64
	block := make(chan struct{})
	h := shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if callpath.Owned(r.Context()) {
			owned.Add(1)
			n, _, _ := callpath.Attempt(r.Context())
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
	req.Header.Set(callpath.HeaderAttempt, "2")
	h.ServeHTTP(w, req)
	require.Equal(t, 429, w.Code, "the retry is shed")
	require.Contains(t, w.Body.String(), "(priority)")
	// A first attempt from upstream still gets the last slot, marked as owned.
	serve(callpath.HeaderAttempt, "1")
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
	s := policy.Must(shed.New(shed.Options{Clock: clock, Quota: &shed.Quota{
		Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
		Rate: 0.5, Burst: 2, // one token per 2s
	}}))
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
	require.Equal(t, 204, do("").Code, "no key: the shared bucket's first token")
	clock.Advance(2 * time.Second)
	require.Equal(t, 204, do("a").Code)
	require.Equal(t, uint64(1), s.Stats().Rejected[shed.ReasonQuota])
}

// storeFunc is a QuotaStore on a function.
type storeFunc func(ctx context.Context, key string, r rate.Limit, burst int) (time.Duration, bool)

func (f storeFunc) Allow(ctx context.Context, key string, r rate.Limit, burst int) (time.Duration, bool) {
	return f(ctx, key, r, burst)
}

func TestMiddleware_QuotaStoreDecides(t *testing.T) {
	type ask struct {
		key   string
		r     rate.Limit
		burst int
		hdr   string
	}
	var asked []ask
	store := storeFunc(func(ctx context.Context, key string, r rate.Limit, burst int) (time.Duration, bool) {
		asked = append(asked, ask{key, r, burst, ctx.Value(ctxKey{}).(string)})
		return 2500 * time.Millisecond, key != "spent"
	})
	s := policy.Must(shed.New(shed.Options{Quota: &shed.Quota{
		Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
		Rate: 5, Burst: 7, Store: store,
	}}))
	h := shed.Middleware(okHandler, s)
	do := func(client string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req = req.WithContext(context.WithValue(req.Context(), ctxKey{}, "req-"+client))
		req.Header.Set("X-Client", client)
		h.ServeHTTP(w, req)
		return w
	}
	require.Equal(t, 204, do("a").Code)
	w := do("spent")
	require.Equal(t, 429, w.Code)
	require.Equal(t, "3", w.Header().Get("Retry-After"), "the store's wait, rounded up")
	require.Equal(t, 204, do("").Code, "no key: the shared bucket")
	require.Equal(t, []ask{{"a", 5, 7, "req-a"}, {"spent", 5, 7, "req-spent"}, {"\x00no key", 5, 7, "req-"}}, asked,
		"the store is asked with the request's context and the quota's rate and burst")
}

type ctxKey struct{}

// A *breaker.Breaker is what Options.Breaker reads.
var _ shed.Breaker = (*breaker.Breaker)(nil)

func TestMiddleware_OpenBreakerAnswers503WithItsOpenTime(t *testing.T) {
	b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: 20 * time.Second, OpenJitter: -1}))
	_ = policy.Must(policy.Wrap(b)).Do(context.Background(), func(context.Context) error { return io.ErrUnexpectedEOF })
	s := policy.Must(shed.New(shed.Options{Breaker: b}))
	w := httptest.NewRecorder()
	shed.Middleware(okHandler, s).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, 503, w.Code)
	ra := w.Header().Get("Retry-After")
	require.Contains(t, []string{"19", "20"}, ra, "the breaker's remaining open time, rounded up")
	require.Equal(t, uint64(1), s.Stats().Rejected[shed.ReasonBreaker])
}

// TestMiddleware_NilBreakerPointerIsNoBreaker: a *breaker.Breaker left nil in
// Options.Breaker guards nothing; requests are served.
func TestMiddleware_NilBreakerPointerIsNoBreaker(t *testing.T) {
	var b *breaker.Breaker
	s := policy.Must(shed.New(shed.Options{Breaker: b}))
	w := httptest.NewRecorder()
	shed.Middleware(okHandler, s).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusNoContent, w.Code, "served, not refused")
	require.Zero(t, s.Stats().Rejected[shed.ReasonBreaker])
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
	req.Header.Set(callpath.HeaderAttempt, "3")
	w := &nopWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); n != 0 {
		t.Errorf("a rejection allocates %v per request; want 0", n)
	}
}

// TestShedder_RefusalAsAPolicyDoesNotAllocate: a pipeline's refusals share their
// *policy.RejectError, one per reason and Retry-After.
func TestShedder_RefusalAsAPolicyDoesNotAllocate(t *testing.T) {
	s, permit := full(t, shed.Options{Clock: policytest.NewClock(t0), Rand: pinned(0)})
	defer permit.Release()
	run := s.Bind(policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error { return fn(ctx) }), policy.Env{})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	first := run.Run(ctx, fn)
	require.ErrorIs(t, first, shed.ErrShed)
	require.Same(t, first, run.Run(ctx, fn), "the same reason and Retry-After: the same error")
	if race.Enabled {
		return // the race detector allocates
	}
	if n := testing.AllocsPerRun(1000, func() { _ = run.Run(ctx, fn) }); n != 0 {
		t.Errorf("a refusal through Run allocates %v per call; want 0", n)
	}
}

// load is what a loopback run at three times the handler's capacity saw.
type load struct {
	sent, served, rejected, failed int64
	admitted                       uint64
	elapsed                        time.Duration
}

// loadAtThreeTimesCapacity sends 3× what the handler can serve over loopback for
// duration: the handler serves 4 at a time, 20 ms each (200/s), offered 600/s.
func loadAtThreeTimesCapacity(tb testing.TB, duration time.Duration) load {
	const (
		workers = 4
		work    = 20 * time.Millisecond
		rate    = 3 * workers * int(time.Second/work) // 600/s
	)
	sem := make(chan struct{}, workers)
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sem <- struct{}{}
		time.Sleep(work) // the simulated work itself
		<-sem
		w.WriteHeader(200)
	})
	s, err := shed.New(shed.Options{Limit: shed.LimitOptions{Initial: 8, Min: 4, Max: 64, Window: 100 * time.Millisecond}})
	require.NoError(tb, err)
	srv := httptest.NewServer(shed.Middleware(handler, s))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var sent, served, rejected, failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
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
			case 429:
				rejected.Add(1)
			default:
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	return load{sent: sent.Load(), served: served.Load(), rejected: rejected.Load(), failed: failed.Load(),
		admitted: s.Stats().Admitted, elapsed: time.Since(start)}
}

// TestMiddleware_LoadAtThreeTimesCapacity checks the accounting under overload over
// loopback: every request is served or answered, none lost, and the shedder's count
// of admissions is the count of 200s. How much useful work gets done is a figure, not
// a test: see BenchmarkMiddleware_GoodputAtThreeTimesCapacity.
func TestMiddleware_LoadAtThreeTimesCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1-second load test")
	}
	l := loadAtThreeTimesCapacity(t, time.Second)
	t.Logf("sent %d, served %d, rejected %d, failed %d", l.sent, l.served, l.rejected, l.failed)
	require.Zero(t, l.failed, "requests lost or failed")
	require.Equal(t, l.sent, l.served+l.rejected, "every request served or answered")
	require.Equal(t, uint64(l.served), l.admitted, "the shedder admitted exactly the requests served")
}

// BenchmarkMiddleware_GoodputAtThreeTimesCapacity reports the goodput of a handler of
// 200/s capacity offered 600/s through the shedder, as a share of that capacity.
func BenchmarkMiddleware_GoodputAtThreeTimesCapacity(b *testing.B) {
	var share float64
	for range b.N {
		l := loadAtThreeTimesCapacity(b, 2*time.Second)
		share += float64(l.served) / l.elapsed.Seconds() / 200
	}
	b.ReportMetric(100*share/float64(b.N), "%capacity")
}

// TestCurlHonoursRetryAfter checks a real client against the shedder: curl --retry
// reads the Retry-After we send and says it will wait exactly that long before it
// retries ("Will retry in 1 seconds"), then its retry is served.
func TestCurlHonoursRetryAfter(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl; .ci/run installs it)")
	}
	s := policy.Must(shed.New(shed.Options{Quota: &shed.Quota{Key: func(*http.Request) string { return "all" }, Rate: 1, Burst: 1}}))
	var mu sync.Mutex
	var codes []int
	var retryAfter []string
	var h http.Handler = shed.Middleware(okHandler, s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		mu.Lock()
		codes = append(codes, rec.code)
		retryAfter = append(retryAfter, w.Header().Get("Retry-After"))
		mu.Unlock()
	}))
	defer srv.Close()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // spend the token

	var stdout, stderr strings.Builder
	cmd := exec.Command(curl, "--no-progress-meter", "--retry", "3", "--output", t.TempDir()+"/body",
		"--write-out", "%{http_code}", srv.URL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "curl: %s", stderr.String())
	require.Equal(t, "204", strings.TrimSpace(stdout.String()), "curl's final status")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{429, 204}, codes)
	require.Equal(t, "1", retryAfter[0], "the quota's next token is 1 s away")
	require.Contains(t, stderr.String(), "Will retry in "+retryAfter[0]+" second",
		"curl says it waits the Retry-After we sent")
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
	s := policy.Must(shed.New(shed.Options{}))
	serveParallel(b, shed.Middleware(okHandler, s))
}

func BenchmarkMiddleware_Reject(b *testing.B) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
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

// BenchmarkRetryAfterSpread simulates 1 000 clients refused by one overloaded shedder
// over one second (one a millisecond) and reports how evenly they come back: the peak
// over the mean of returns per 100 ms, over the window in which they return. 1.0 is
// perfectly even; a shedder that told everyone the same value would leave every
// return in one second of the window.
func BenchmarkRetryAfterSpread(b *testing.B) {
	var worst, sum float64
	for i := 0; i < b.N; i++ {
		clock := policytest.NewClock(t0)
		s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: rand.New(rand.NewPCG(uint64(i), 9))}))
		held, _ := s.Admit(context.Background(), shed.PriorityDefault)
		h := shed.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), s)
		var returns []time.Duration
		for c := range 1000 {
			at := time.Duration(c) * time.Millisecond
			clock.Set(t0.Add(at))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || rec.Code != http.StatusTooManyRequests {
				b.Fatalf("client %d: status %d, Retry-After %q", c, rec.Code, rec.Header().Get("Retry-After"))
			}
			returns = append(returns, at+time.Duration(secs)*time.Second)
		}
		held.Release()
		ratio := peakOverMean(returns, 100*time.Millisecond)
		worst, sum = max(worst, ratio), sum+ratio
	}
	b.ReportMetric(sum/float64(b.N), "peak/mean")
	b.ReportMetric(worst, "worst-peak/mean")
}

// peakOverMean buckets times by width over [min, max] and returns the fullest bucket
// over the mean bucket.
func peakOverMean(ts []time.Duration, width time.Duration) float64 {
	lo, hi := slices.Min(ts), slices.Max(ts)
	buckets := make([]int, int((hi-lo)/width)+1)
	for _, t := range ts {
		buckets[int((t-lo)/width)]++
	}
	return float64(slices.Max(buckets)) / (float64(len(ts)) / float64(len(buckets)))
}
