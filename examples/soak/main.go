// Command soak runs the storm's call path — edge → api → data → database on
// 127.0.0.1, every hop through a Backstop pipeline and behind a shedder — for a bounded
// time while package chaos injects one fault after another, then all of them at once,
// and checks what must hold whatever happens: every user call is answered (none lost),
// no non-idempotent request is retried, every response body is closed, goroutines
// return to where they started and the heap stays bounded. It prints a table per
// fault and exits 1 on any violation.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/chaos"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

const (
	dbWorkers   = 4
	dbWork      = 25 * time.Millisecond // 160 requests/s
	userTimeout = 3 * time.Second
	baseRate    = 100 // user calls/s
	postShare   = 0.1 // of user calls: POST without an Idempotency-Key
)

func main() {
	duration := flag.Duration("duration", 30*time.Second, "total run time, split evenly among the faults")
	seed := flag.Uint64("seed", 1, "seed for arrivals, methods and faults")
	flag.Parse()
	if *duration < 7*time.Second || *duration > 10*time.Minute {
		fmt.Fprintln(os.Stderr, "soak: -duration: want between 7s and 10m")
		os.Exit(2)
	}
	ok, err := soak(*duration, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Println("soak: FAILED")
		os.Exit(1)
	}
	fmt.Println("soak: ok")
}

// topology is the call path and its fault injectors.
type topology struct {
	servers   []*http.Server
	bases     []*http.Transport
	counters  []*policytest.Bodies
	edge      string
	faults    map[string]*chaos.Injector
	postRetry atomic.Int64 // POSTs that arrived as a retry (attempt > 1): must stay 0
}

func (t *topology) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.servers = append(t.servers, srv)
	return "http://" + ln.Addr().String(), nil
}

// watch counts non-idempotent requests that arrive as retries.
func (t *topology) watch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if n, _ := strconv.Atoi(r.Header.Get(callpath.HeaderAttempt)); n > 1 {
				t.postRetry.Add(1)
			}
		}
		next.ServeHTTP(w, r)
	})
}

func build(rnd jitter.Rand) (*topology, error) {
	t := &topology{faults: map[string]*chaos.Injector{}}
	faults := map[string]chaos.Options{
		"reset":       {Probability: 0.2, Reset: true},
		"503-storm":   {Probability: 0.5, Status: http.StatusServiceUnavailable, RetryAfter: time.Second},
		"slow":        {Probability: 0.5, Latency: 300 * time.Millisecond, LatencyJitter: 200 * time.Millisecond},
		"body-errors": {Probability: 0.3, TruncateBody: 3},
	}
	sem := make(chan struct{}, dbWorkers)
	var db http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(dbWork)
		<-sem
		_, _ = io.WriteString(w, "row: 42 widgets")
	})
	for _, name := range []string{"reset", "503-storm", "slow", "body-errors"} { // fixed order: a deterministic chain
		o := faults[name]
		o.Rand = rnd
		inj := policy.Must(chaos.New(o))
		inj.Enable(false)
		t.faults[name] = inj
		db = inj.Middleware(db)
	}
	url, err := t.serve(t.watch(shed.Middleware(db, policy.Must(shed.New(shed.Options{Name: "db", Rand: rnd})))))
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"data", "api", "edge"} {
		base := &http.Transport{MaxIdleConnsPerHost: 256}
		counter := &policytest.Bodies{Next: base}
		t.bases, t.counters = append(t.bases, base), append(t.counters, counter)
		brk := policy.Must(breaker.New(breaker.Options{Name: name, OpenTimeout: time.Second, Rand: rnd}))
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2500 * time.Millisecond})), brk, policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
			policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: 50 * time.Millisecond, Cap: time.Second, Rand: rnd})),
			policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))))
		client := &http.Client{Transport: policyhttp.NewTransport(counter, p, policyhttp.Options{})}
		next := url
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, next, nil)
			res, err := client.Do(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			_, copyErr := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if copyErr != nil {
				w.WriteHeader(http.StatusBadGateway) // a cut body is a failed call
				return
			}
			w.WriteHeader(res.StatusCode)
		})
		url, err = t.serve(t.watch(shed.Middleware(handler, policy.Must(shed.New(shed.Options{Name: name, Breaker: brk, Rand: rnd})))))
		if err != nil {
			return nil, err
		}
	}
	t.edge = url
	return t, nil
}

func (t *topology) close() {
	for _, s := range t.servers {
		s.Close()
	}
	for _, b := range t.bases {
		b.CloseIdleConnections()
	}
}

// phase is one fault, or several, for a while.
type phase struct {
	name     string
	faults   []string // injectors to enable
	cancel   bool     // users cancel 30 % of calls mid-call
	rateMult float64  // user rate × baseRate
}

// result is one phase's figures.
type result struct {
	phase                             string
	calls, ok, failed, lost, canceled int64
	peakHeapMB                        float64
	goroutines                        int
}

func soak(total time.Duration, seed uint64) (bool, error) {
	phases := []phase{
		{name: "reset", faults: []string{"reset"}, rateMult: 1},
		{name: "503+Retry-After storm", faults: []string{"503-storm"}, rateMult: 1},
		{name: "slow database", faults: []string{"slow"}, rateMult: 1},
		{name: "body read errors", faults: []string{"body-errors"}, rateMult: 1},
		{name: "callers cancel", cancel: true, rateMult: 1},
		{name: "3× overload", rateMult: 3 * 160.0 / baseRate},
		{name: "everything at once", faults: []string{"reset", "503-storm", "slow", "body-errors"}, cancel: true, rateMult: 3 * 160.0 / baseRate},
	}
	per := total / time.Duration(len(phases))
	runtime.GC()
	baseline := runtime.NumGoroutine()
	rnd := jitter.Seeded(seed, 7)
	t, err := build(rnd)
	if err != nil {
		return false, err
	}
	user := &policytest.Bodies{Next: &http.Transport{MaxIdleConnsPerHost: 1024}}
	client := &http.Client{Transport: user}
	arrivals := rand.New(rand.NewPCG(seed, 8))

	fmt.Printf("soak: edge → api → data → db on 127.0.0.1, %v per fault, %d calls/s (3× overload: %d/s), %d%% POSTs, seed %d\n\n",
		per, baseRate, int(3*160.0), int(postShare*100), seed)
	var results []result
	for _, ph := range phases {
		for _, f := range ph.faults {
			t.faults[f].Enable(true)
		}
		r := run(ph, per, client, t.edge, arrivals)
		for _, f := range ph.faults {
			t.faults[f].Enable(false)
		}
		r.goroutines = runtime.NumGoroutine()
		results = append(results, r)
	}
	t.close()
	user.Next.(*http.Transport).CloseIdleConnections()

	// Goroutines return to the baseline once servers and connections are gone.
	after := runtime.NumGoroutine()
	for end := time.Now().Add(10 * time.Second); after > baseline && time.Now().Before(end); after = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}

	fmt.Printf("%-24s %7s %7s %7s %6s %9s %14s %11s\n", "fault", "calls", "ok", "failed", "lost", "canceled", "peak heap MB", "goroutines")
	good := true
	for _, r := range results {
		fmt.Printf("%-24s %7d %7d %7d %6d %9d %14.1f %11d\n", r.phase, r.calls, r.ok, r.failed, r.lost, r.canceled, r.peakHeapMB, r.goroutines)
		if r.lost != 0 {
			good = false
		}
		if r.ok+r.failed+r.lost+r.canceled != r.calls {
			fmt.Printf("  violation: %s: calls do not add up\n", r.phase)
			good = false
		}
	}
	fmt.Println()
	check := func(okay bool, format string, args ...any) {
		mark := "ok  "
		if !okay {
			mark, good = "FAIL", false
		}
		fmt.Printf("%s %s\n", mark, fmt.Sprintf(format, args...))
	}
	var lost int64
	for _, r := range results {
		lost += r.lost
	}
	check(lost == 0, "no user call lost (every one answered before the user gave up): %d lost", lost)
	check(t.postRetry.Load() == 0, "no non-idempotent request retried: %d POSTs arrived as a retry", t.postRetry.Load())
	open := int64(0)
	for _, c := range append(t.counters, user) {
		open += c.Opened() - c.Closed()
	}
	check(open == 0, "every response body closed: %d left open", open)
	check(after <= baseline+2, "goroutines back to the baseline after the run: %d before, %d after", baseline, after)
	var peak float64
	for _, r := range results {
		peak = max(peak, r.peakHeapMB)
	}
	check(peak < 512, "heap bounded: peak %.1f MB (limit 512 MB)", peak)
	return good, nil
}

// run sends user calls for d under ph and accounts for each.
func run(ph phase, d time.Duration, client *http.Client, edge string, arrivals *rand.Rand) result {
	r := result{phase: ph.name}
	var ok, failed, lost, canceled, calls atomic.Int64
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // heap samples
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				return
			}
		}
	}()
	rate := baseRate * ph.rateMult
	var wg sync.WaitGroup
	begin := time.Now()
	for next := begin; next.Sub(begin) < d; next = next.Add(time.Duration(arrivals.ExpFloat64() / rate * float64(time.Second))) {
		time.Sleep(time.Until(next))
		method := http.MethodGet
		if arrivals.Float64() < postShare {
			method = http.MethodPost
		}
		cancelAfter := time.Duration(0)
		if ph.cancel && arrivals.Float64() < 0.3 {
			cancelAfter = time.Duration(5+arrivals.IntN(95)) * time.Millisecond
		}
		calls.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), userTimeout)
			defer cancel()
			byUser := false
			if cancelAfter > 0 {
				stop := time.AfterFunc(cancelAfter, func() { byUser = true; cancel() })
				defer stop.Stop()
			}
			req, _ := http.NewRequestWithContext(ctx, method, edge, strings.NewReader(""))
			res, err := client.Do(req)
			switch {
			case err != nil && errors.Is(ctx.Err(), context.Canceled):
				canceled.Add(1)
			case err != nil && ctx.Err() != nil:
				lost.Add(1)
			case err != nil:
				failed.Add(1)
			default:
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
			_ = byUser
		}()
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	r.calls, r.ok, r.failed, r.lost, r.canceled = calls.Load(), ok.Load(), failed.Load(), lost.Load(), canceled.Load()
	r.peakHeapMB = float64(peak.Load()) / (1 << 20)
	return r
}
