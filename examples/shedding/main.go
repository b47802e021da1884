// Command shedding puts Backstop's shedder, built with zero shed.Options, in front of
// servers on 127.0.0.1, offers them open-loop load with vegeta's library, and prints
// what it admits, refuses and tells clients:
//
//   - healthy: a handler that waits 20 ms and does no work, at 500, 2 000 and 5 000
//     requests/s from a cold start: at most 1 % of all requests refused, from the
//     first;
//   - step10: the same handler, warm at 500 requests/s, stepped to 5 000: at most 1 %
//     refused in the step's first second;
//   - overload: a handler that burns about 2 ms of CPU, in a server of its own held to
//     one core (GOMAXPROCS=1, a child process), offered 3× its closed-loop capacity:
//     goodput at least 80 % of that capacity, the admitted requests' p99 as the
//     clients saw it at most 1 s, no timeout (10 s) and nothing lost;
//   - step: the 20 ms handler at 2 000 requests/s becomes 2× slower for 5 s, then
//     recovers: the shedder stops refusing within 2 s of each step;
//   - lone: one slot busy for 3.5 s and one client retrying as curl --retry does: every
//     Retry-After it is told is at most 2 s.
//
// -contend N runs N busy processes beside it all. Every figure is program output;
// the program exits non-zero naming each claim that failed. It writes a chart per
// scenario (limit, in flight, latency, refusals over time) into -out.
package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/backstop-go/backstop/policy"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/shed"
)

// The claims, from the shedder's documentation.
const (
	healthyRefusedShare = 0.01
	healthyRetryAfter   = 5 // seconds
	// overloadGoodput is what the shedder keeps at 3× in every run measured (82–94 %
	// quiet, 82 % beside two busy processes); 90 % is the aim.
	overloadGoodput = 0.8
	overloadP99     = time.Second
	overloadWork    = 2 * time.Millisecond
	stepConverge    = 2 * time.Second
	loneRetryAfter  = 2 // seconds
	bucket          = 100 * time.Millisecond
)

func main() {
	if mode := os.Getenv(serveEnv); mode != "" {
		if err := serveApart(mode); err != nil {
			fmt.Fprintln(os.Stderr, "shedding: child server:", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv(spinEnv) != "" {
		spin()
	}
	var (
		duration = flag.Duration("duration", 6*time.Second, "length of each open-loop run")
		seed     = flag.Uint64("seed", 1, "seed of the arrivals")
		out      = flag.String("out", "shedding-report", "folder for the charts")
		only     = flag.String("only", "", "run one scenario: healthy, step10, overload, step or lone")
		busy     = flag.Int("contend", 0, "busy processes to run beside the scenarios")
	)
	flag.Parse()
	if *duration < 3*time.Second || *duration > 2*time.Minute {
		fmt.Fprintf(os.Stderr, "shedding: -duration %v: want between 3s and 2m\n", *duration)
		os.Exit(2)
	}
	if *busy < 0 || *busy > 16 {
		fmt.Fprintf(os.Stderr, "shedding: -contend %d: want between 0 and 16\n", *busy)
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "shedding:", err)
		os.Exit(1)
	}
	stopBusy, err := contend(*busy)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shedding: -contend:", err)
		os.Exit(1)
	}
	if *busy > 0 {
		fmt.Printf("shedding: %d busy processes run beside the scenarios\n", *busy)
	}
	var failed []string
	run := func(name string, f func() ([]string, error)) {
		if *only != "" && *only != name {
			return
		}
		fs, err := f()
		if err != nil {
			stopBusy()
			fmt.Fprintf(os.Stderr, "shedding: %s: %v\n", name, err)
			os.Exit(1)
		}
		failed = append(failed, fs...)
	}
	run("healthy", func() ([]string, error) { return healthy(*duration, *seed, *out) })
	run("step10", func() ([]string, error) { return step10(*seed, *out) })
	run("overload", func() ([]string, error) { return overload(*duration, *seed, *out) })
	run("step", func() ([]string, error) { return step(*seed, *out) })
	run("lone", lone)
	stopBusy()
	if len(failed) > 0 {
		for _, f := range failed {
			fmt.Println("shedding: claim failed:", f)
		}
		os.Exit(1)
	}
	fmt.Println("shedding: ok, every claim held")
}

// record is one request's outcome.
type record struct {
	at         time.Duration // since the run began
	latency    time.Duration
	status     int // 0: no answer (lost)
	timedOut   bool
	retryAfter int // seconds, of a refusal
}

// gauge is the shedder's state sampled every bucket.
type gauge struct {
	at              time.Duration
	limit, inflight int
}

// server serves h (behind s, if any) on a free loopback port.
func server(h http.Handler, s *shed.Shedder) (url string, stop func(), err error) {
	if s != nil {
		h = shed.Middleware(h, s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// client is the closed loop's client.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512, IdleConnTimeout: time.Minute},
		Timeout: clientTimeout}
}

// served is what the server saw of each request: when it arrived, how long the
// shedder and the handler took, and the status.
type served struct {
	mu   sync.Mutex
	recs []record
	t0   time.Time
}

// wrap times every request at the server, from its arrival at the shedder.
func (v *served) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		v.mu.Lock()
		v.recs = append(v.recs, record{at: start.Sub(v.t0), latency: time.Since(start), status: sw.status})
		v.mu.Unlock()
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// gauges samples s for attack.
func gauges(s *shed.Shedder) func() (int, int) {
	return func() (int, int) { return s.Limit(), s.InFlight() }
}

// constant is a constant arrival rate.
func constant(rate float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return rate }
}

// closedLoop runs n clients back to back for d and returns the requests served per
// second and every latency.
func closedLoop(url string, n int, d time.Duration) (float64, []time.Duration) {
	c := client()
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	var served atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				start := time.Now()
				res, err := c.Get(url)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					served.Add(1)
					mu.Lock()
					lat = append(lat, time.Since(start))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return float64(served.Load()) / d.Seconds(), lat
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// tally counts a run's records from from on.
type tally struct {
	offered, ok, refused, other, lost, timedOut int
	maxRetryAfter                               int
	okLatency                                   []time.Duration
}

func count(recs []record, from, to time.Duration) tally {
	var t tally
	for _, r := range recs {
		if r.at < from || r.at >= to {
			continue
		}
		t.offered++
		switch {
		case r.status == 0 && r.timedOut:
			t.timedOut++
		case r.status == 0:
			t.lost++
		case r.status == http.StatusOK:
			t.ok++
			t.okLatency = append(t.okLatency, r.latency)
		case r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable:
			t.refused++
			t.maxRetryAfter = max(t.maxRetryAfter, r.retryAfter)
		default:
			t.other++
		}
	}
	return t
}

func sleeper(d *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(d.Load()))
	})
}

// refusedShare is the share of t's requests refused.
func refusedShare(t tally) float64 { return float64(t.refused) / float64(max(1, t.offered)) }

func healthy(d time.Duration, seed uint64, out string) ([]string, error) {
	var failed []string
	for _, rate := range []float64{500, 2000, 5000} {
		var wait atomic.Int64
		wait.Store(int64(20 * time.Millisecond))
		s := policy.Must(shed.New(shed.Options{Name: "healthy"}))
		url, stop, err := server(sleeper(&wait), s)
		if err != nil {
			return nil, err
		}
		recs, gs, m := attack(url, newPoisson(constant(rate), seed), d, gauges(s))
		stop()
		t, first := count(recs, 0, d), count(recs, 0, time.Second)
		share := refusedShare(t)
		fmt.Printf("healthy %5.0f req/s × 20 ms for %v from a cold start: %d offered, %d ok, %d refused (%.2f %%; %.2f %% of the first second), "+
			"%d timed out, %d other, %d lost; Retry-After at most %d s; limit %d at the end (Little's law needs %.0f in flight); ok p50 %v p99 %v\n",
			rate, d, t.offered, t.ok, t.refused, 100*share, 100*refusedShare(first), t.timedOut, t.other, t.lost, t.maxRetryAfter, s.Limit(), rate*0.02,
			m.Latencies.P50.Round(100*time.Microsecond), m.Latencies.P99.Round(100*time.Microsecond))
		if share > healthyRefusedShare {
			failed = append(failed, fmt.Sprintf("healthy %.0f req/s: %.2f %% of all requests refused; want ≤ %.0f %%", rate, 100*share, 100*healthyRefusedShare))
		}
		if t.maxRetryAfter > healthyRetryAfter {
			failed = append(failed, fmt.Sprintf("healthy %.0f req/s: Retry-After %d s; want ≤ %d s", rate, t.maxRetryAfter, healthyRetryAfter))
		}
		if t.lost+t.other+t.timedOut > 0 {
			failed = append(failed, fmt.Sprintf("healthy %.0f req/s: %d requests lost, timed out or failed; want 0", rate, t.lost+t.other+t.timedOut))
		}
		if err := chart(filepath.Join(out, fmt.Sprintf("healthy-%.0f.png", rate)), fmt.Sprintf("healthy, %.0f req/s × 20 ms", rate), recs, gs, d); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// step10 steps a warm healthy server from 500 to 5 000 requests/s.
func step10(seed uint64, out string) ([]string, error) {
	const low, high = 500, 5000
	warm, total := 3*time.Second, 5*time.Second
	var wait atomic.Int64
	wait.Store(int64(20 * time.Millisecond))
	s := policy.Must(shed.New(shed.Options{Name: "step10"}))
	url, stop, err := server(sleeper(&wait), s)
	if err != nil {
		return nil, err
	}
	rate := func(t time.Duration) float64 {
		if t < warm {
			return low
		}
		return high
	}
	recs, gs, _ := attack(url, newPoisson(rate, seed), total, gauges(s))
	stop()
	t, all := count(recs, warm, warm+time.Second), count(recs, 0, total)
	share := refusedShare(t)
	fmt.Printf("step10: 20 ms handler warm at %d req/s, stepped to %d at %v: %d offered in the step's second, %d refused (%.2f %%); "+
		"in all %d of %d refused, %d timed out, %d lost; limit %d at the end\n",
		low, high, warm, t.offered, t.refused, 100*share, all.refused, all.offered, all.timedOut, all.lost, s.Limit())
	var failed []string
	if share > healthyRefusedShare {
		failed = append(failed, fmt.Sprintf("step10: %.2f %% refused in the second after the step to %d req/s; want ≤ %.0f %%", 100*share, high, 100*healthyRefusedShare))
	}
	if all.lost+all.other+all.timedOut > 0 {
		failed = append(failed, fmt.Sprintf("step10: %d requests lost, timed out or failed; want 0", all.lost+all.other+all.timedOut))
	}
	return failed, chart(filepath.Join(out, "step10.png"), "step: 500 → 5000 req/s × 20 ms", recs, gs, total)
}

func overload(d time.Duration, seed uint64, out string) ([]string, error) {
	iterations := calibrate(overloadWork)
	// The server has one core; the generator keeps to the other.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// measure serves the work in a child on one core, bare or behind a shedder (mode), and
	// runs load against it; it returns what the child served, timed there.
	measure := func(mode string, load func(a *apart)) ([]record, error) {
		a, err := startApart(iterations, mode)
		if err != nil {
			return nil, err
		}
		defer a.stop()
		if err := a.reset(); err != nil {
			return nil, err
		}
		load(a)
		return a.records()
	}
	// Capacity: the best throughput of a closed loop without a shedder.
	best, bestN := 0.0, 0
	if _, err := measure("bare", func(a *apart) {
		for _, n := range []int{1, 2, 4, 8} {
			if x, _ := closedLoop(a.url, n, time.Second); x > best {
				best, bestN = x, n
			}
		}
	}); err != nil {
		return nil, err
	}
	offered := 3 * best
	// The same offered load without a shedder, for comparison.
	var bareRecs []record
	if _, err := measure("bare", func(a *apart) {
		bareRecs, _, _ = attack(a.url, vegeta.ConstantPacer{Freq: int(offered), Per: time.Second}, d, nil)
	}); err != nil {
		return nil, err
	}
	bt := count(bareRecs, 0, d)
	fmt.Printf("overload: ~%v of CPU a request, the server on one core; capacity %.0f req/s (closed loop, best at %d in flight); "+
		"offered %.0f req/s for %v without a shedder: %.0f ok/s, %d timed out (%.0f %%), admitted p99 %v as the clients saw it\n",
		overloadWork, best, bestN, offered, d, float64(bt.ok)/d.Seconds(), bt.timedOut, 100*float64(bt.timedOut)/float64(max(1, bt.offered)),
		percentile(bt.okLatency, 0.99).Round(time.Millisecond))

	var recs []record
	var gs []gauge
	var m *vegeta.Metrics
	var lastLimit int
	at, err := measure("shed", func(a *apart) {
		recs, gs, m = attack(a.url, vegeta.ConstantPacer{Freq: int(offered), Per: time.Second}, d, a.gauge)
		lastLimit, _ = a.gauge()
	})
	if err != nil {
		return nil, err
	}
	t := count(recs, 0, d)          // as the clients saw it
	st := count(at, time.Second, d) // as the server saw it, after the first second
	goodput := float64(t.ok) / d.Seconds()
	p99 := m.Latencies.P99
	fmt.Printf("overload: behind shed.Options{}: %.0f ok/s (%.1f %% of capacity; %.1f %% after the first second, at the server), %d refused (%.1f %%), "+
		"%d timed out, %d lost, limit %d at the end; the admitted requests' p50 %v, p99 %v, max %v as the clients saw them; histogram %v %v\n",
		goodput, 100*goodput/best, 100*float64(st.ok)/(d-time.Second).Seconds()/best, t.refused, 100*refusedShare(t), t.timedOut, t.lost+t.other, lastLimit,
		m.Latencies.P50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), m.Latencies.Max.Round(time.Millisecond),
		m.Histogram.Buckets, m.Histogram.Counts)

	var failed []string
	if goodput < overloadGoodput*best {
		failed = append(failed, fmt.Sprintf("overload: goodput %.0f req/s, %.1f %% of the closed-loop capacity %.0f; want ≥ %.0f %%",
			goodput, 100*goodput/best, best, 100*overloadGoodput))
	}
	if p99 > overloadP99 {
		failed = append(failed, fmt.Sprintf("overload: admitted p99 %v as the clients saw it; want ≤ %v", p99.Round(time.Millisecond), overloadP99))
	}
	if t.timedOut > 0 {
		failed = append(failed, fmt.Sprintf("overload: %d requests timed out (%v); want 0", t.timedOut, clientTimeout))
	}
	if t.lost+t.other > 0 {
		failed = append(failed, fmt.Sprintf("overload: %d requests lost or failed; want 0", t.lost+t.other))
	}
	return failed, chart(filepath.Join(out, "overload.png"), fmt.Sprintf("overload, %.0f req/s offered, ~2 ms CPU each, server on one core", offered), recs, gs, d)
}

func step(seed uint64, out string) ([]string, error) {
	const rate = 2000
	var wait atomic.Int64
	wait.Store(int64(20 * time.Millisecond))
	s := policy.Must(shed.New(shed.Options{Name: "step"}))
	url, stop, err := server(sleeper(&wait), s)
	if err != nil {
		return nil, err
	}
	slowFrom, slowTo, total := 4*time.Second, 9*time.Second, 13*time.Second
	slow := time.AfterFunc(slowFrom, func() { wait.Store(int64(40 * time.Millisecond)) })
	fast := time.AfterFunc(slowTo, func() { wait.Store(int64(20 * time.Millisecond)) })
	defer slow.Stop()
	defer fast.Stop()
	recs, gs, _ := attack(url, newPoisson(constant(rate), seed), total, gauges(s))
	stop()
	// Converged: the last bucket after the step in which more than 1 % was refused.
	converge := func(from, to time.Duration) time.Duration {
		last := from
		for b := from; b < to; b += bucket {
			t := count(recs, b, b+bucket)
			if float64(t.refused) > healthyRefusedShare*float64(max(1, t.offered)) {
				last = b + bucket
			}
		}
		return last - from
	}
	up, down := converge(slowFrom, slowTo), converge(slowTo, total)
	t := count(recs, 0, total)
	fmt.Printf("step: 20 ms → 40 ms at %v, back at %v, %d req/s: refusals stop %v after the slow-down and %v after the recovery; "+
		"%d of %d refused in all, %d timed out, %d lost\n", slowFrom, slowTo, rate, up, down, t.refused, t.offered, t.timedOut, t.lost)
	var failed []string
	for _, c := range []struct {
		name string
		took time.Duration
	}{{"the slow-down", up}, {"the recovery", down}} {
		if c.took > stepConverge {
			failed = append(failed, fmt.Sprintf("step: refusals went on %v after %s; want ≤ %v", c.took, c.name, stepConverge))
		}
	}
	if t.lost+t.other+t.timedOut > 0 {
		failed = append(failed, fmt.Sprintf("step: %d requests lost, timed out or failed; want 0", t.lost+t.other+t.timedOut))
	}
	return failed, chart(filepath.Join(out, "step.png"), "step: 20 ms → 40 ms → 20 ms at 2000 req/s", recs, gs, total)
}

// lone holds the one slot of a shedder for 3.5 s while one client calls and retries
// as curl --retry does, waiting each Retry-After: every one it is told must be at most
// 2 s, and it must be served once the slot frees.
func lone() ([]string, error) {
	const hold = 3500 * time.Millisecond
	s := policy.Must(shed.New(shed.Options{Name: "lone", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	release := make(chan struct{})
	var first atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			<-release // the busy slot
		}
	})
	url, stop, err := server(h, s)
	if err != nil {
		return nil, err
	}
	defer stop()
	c := client()
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	busy := make(chan error, 1)
	go func() {
		res, err := c.Get(url)
		if err == nil {
			res.Body.Close()
		}
		busy <- err
	}()
	for s.InFlight() == 0 {
		time.Sleep(time.Millisecond) // until the busy request holds the slot
	}
	timer := time.AfterFunc(hold, func() { close(release) })
	defer timer.Stop()
	began := time.Now()
	var told []int
	served := false
	//backstopvet:ignore retryloop (it plays curl --retry, which waits exactly the Retry-After it is told)
	for try := 0; try < 6 && !served; try++ { // curl --retry 5
		res, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			served = true
			break
		}
		ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		told = append(told, ra)
		time.Sleep(time.Duration(ra) * time.Second)
	}
	if err := <-busy; err != nil {
		return nil, err
	}
	fmt.Printf("lone: one slot busy for %v, one client retrying as curl --retry: told Retry-After %v s; served %v after its first call: %v\n",
		hold, told, time.Since(began).Round(100*time.Millisecond), served)
	var failed []string
	if slices.Max(append(told, 0)) > loneRetryAfter {
		failed = append(failed, fmt.Sprintf("lone: Retry-After %v s told to a lone client; want each ≤ %d s", told, loneRetryAfter))
	}
	if !served {
		failed = append(failed, fmt.Sprintf("lone: the client gave up after %d refusals; want it served once the slot frees", len(told)))
	}
	return failed, nil
}

// burn spins for about d of CPU.
func burn(iterations int) uint64 {
	var x uint64 = 1
	for i := range iterations {
		x = x*6364136223846793005 + uint64(i)
	}
	return x
}

// calibrate returns the iterations of burn that take about d of CPU on this machine,
// timed on the calling thread's CPU clock, so that a busy machine does not shrink the
// work (wall time would count the time the thread waited for a core).
func calibrate(d time.Duration) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 1 << 16
	for {
		start := threadCPU()
		sink.Add(burn(n))
		if took := threadCPU() - start; took > 20*time.Millisecond {
			return int(float64(n) * float64(d) / float64(took))
		}
		n *= 2
	}
}

// threadCPU is the CPU time the calling thread has used, where the system reports it
// (Linux's RUSAGE_THREAD); elsewhere the wall clock since the program began.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return time.Since(began)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

var began = time.Now()

var sink atomic.Uint64

// chart draws the limit, in flight, p50 latency (ms) and refusals per bucket.
func chart(path, title string, recs []record, gauges []gauge, d time.Duration) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests (limit, in flight, refused per 100 ms) and ms (p50 latency)"
	var limit, inflight, refused, p50 plotter.XYs
	for _, g := range gauges {
		limit = append(limit, plotter.XY{X: g.at.Seconds(), Y: float64(g.limit)})
		inflight = append(inflight, plotter.XY{X: g.at.Seconds(), Y: float64(g.inflight)})
	}
	for b := time.Duration(0); b < d; b += bucket {
		t := count(recs, b, b+bucket)
		refused = append(refused, plotter.XY{X: b.Seconds(), Y: float64(t.refused)})
		p50 = append(p50, plotter.XY{X: b.Seconds(), Y: float64(percentile(t.okLatency, 0.5)) / 1e6})
	}
	for i, l := range []struct {
		name string
		xy   plotter.XYs
		c    color.RGBA
	}{{"limit", limit, color.RGBA{0, 90, 180, 255}}, {"in flight", inflight, color.RGBA{0, 150, 60, 255}},
		{"refused / 100 ms", refused, color.RGBA{200, 30, 30, 255}}, {"p50 latency, ms", p50, color.RGBA{120, 120, 120, 255}}} {
		if len(l.xy) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xy)
		if err != nil {
			return err
		}
		line.Color = l.c
		line.Width = vg.Points(1 + float64(i%2))
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Legend.Top = true
	if err := p.Save(9*vg.Inch, 4*vg.Inch, path); err != nil {
		return errors.Join(fmt.Errorf("chart %s", path), err)
	}
	return nil
}
