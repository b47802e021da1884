package main

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
	"github.com/backstop-go/backstop/sim"
)

// The scenario's fixed shape. The database serves dbWorkers requests at a time, each
// taking dbWork of wall time (workers), under CPU contention too: 160 requests/s; the
// default user load (100/s) is 62 % of it. Like a real database it finishes a query
// whose client has gone away: abandoned work still takes its turn. While it is down
// it runs no query: those waiting for a worker when it goes down fail too (queries
// already running finish).
const (
	dbWorkers   = 4
	dbWork      = 25 * time.Millisecond
	dbCapacity  = dbWorkers * int(time.Second/dbWork) // 160 requests/s
	userTimeout = 3 * time.Second                     // the user gives up after this
	hopTimeout  = time.Second                         // each request's own timeout
	naiveBase   = 50 * time.Millisecond               // 50, 100, 200ms between 4 attempts
	callBudget  = 2500 * time.Millisecond             // Backstop: each layer's overall deadline
	attempts    = 4
)

// mode is how the layers call each other.
type mode int

const (
	// modeNaive: every layer's own loop of 4 attempts with un-jittered backoff.
	modeNaive mode = iota
	// modeOwnerOnly: Backstop's retry, backoff and deadlines through policyhttp, with
	// the owner rule across services (policyhttp.Middleware on every server), and no
	// breaker, budget or shedder: the owner rule's effect on its own.
	modeOwnerOnly
	// modeBackstop: the whole stack — deadline, breaker, budget, retry, per-attempt
	// timeout — and shed.Middleware on every server.
	modeBackstop
)

var modeNames = [...]string{modeNaive: "naive", modeOwnerOnly: "owner_only", modeBackstop: "backstop"}

func (m mode) String() string { return modeNames[m] }

// config is one run's settings.
type config struct {
	mode     mode
	seed     uint64
	rate     float64
	duration time.Duration
	down, up time.Duration // the database's outage, from the start
	bucket   time.Duration
	// hopTimeout bounds each naive request; 0 means none (the probe).
	hopTimeout time.Duration
	contend    int // busy goroutines beside the run, for the report
}

// series counts what happened in each time bucket of a run.
type series struct {
	start   time.Time
	width   time.Duration
	mu      sync.Mutex // guards the slices
	started []int
	ok      []int // by start time
	okDone  []int // by completion time
	failed  []int
	lost    []int
	// failedDone and lostDone count, by completion time, the calls answered with an
	// error and those the user gave up on (at start + userTimeout).
	failedDone, lostDone []int
	db                   []int
	queries              []int           // queries the database ran, by completion time
	lat                  []time.Duration // of every call
	failedLat            []time.Duration // of the calls answered with an error
	calls                []sim.CallAt    // every call's start (since the series' start) and whether it was answered ok
	events               events
}

// events counts, from the pipelines' and shedders' events, why work did not happen.
type events struct {
	suppressedOwner, refusedBudget, refusedBreaker, shed atomic.Int64
}

// Observe implements event.Observer.
func (c *events) Observe(e event.Event) {
	switch e.Kind {
	case event.RetrySuppressed:
		switch e.Reason {
		case event.SuppressedOwner:
			c.suppressedOwner.Add(1)
		case event.SuppressedBudget:
			c.refusedBudget.Add(1)
		}
	case event.CallEnd:
		if errors.Is(e.Err, breaker.ErrOpen) {
			c.refusedBreaker.Add(1)
		}
	case event.Shed:
		c.shed.Add(1)
	}
}

func newSeries(start time.Time, width, total time.Duration) *series {
	n := int(total/width) + 1
	return &series{start: start, width: width, started: make([]int, n), ok: make([]int, n),
		okDone: make([]int, n), failed: make([]int, n), lost: make([]int, n), db: make([]int, n), queries: make([]int, n),
		failedDone: make([]int, n), lostDone: make([]int, n)}
}

func (s *series) index(t time.Time) int {
	return min(max(int(t.Sub(s.start)/s.width), 0), len(s.db)-1)
}

// count adds one to counts (s.db or s.queries) in t's bucket.
func (s *series) count(counts []int, t time.Time) {
	s.mu.Lock()
	counts[s.index(t)]++
	s.mu.Unlock()
}

// outcome of a user call, recorded in the bucket the call started in.
const (
	callOK = iota
	callFailed
	callLost
)

func (s *series) call(start time.Time, outcome int, latency time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.index(start)
	s.started[i]++
	switch outcome {
	case callOK:
		s.ok[i]++
		s.okDone[s.index(start.Add(latency))]++
	case callFailed:
		s.failed[i]++
		s.failedDone[s.index(start.Add(latency))]++
		s.failedLat = append(s.failedLat, latency)
	default:
		s.lost[i]++
		s.lostDone[s.index(start.Add(latency))]++
	}
	s.lat = append(s.lat, latency)
	s.calls = append(s.calls, sim.CallAt{At: start.Sub(s.start), OK: outcome == callOK})
}

// hop is a service's client for the service below it.
type hop interface {
	get(ctx context.Context, url string) (answer, error)
}

// naiveHop is the hand-written retry loop the storm is made of: 4 attempts, un-jittered
// exponential backoff, no budget, no idea that the layers above retry too.
type naiveHop struct {
	client  *http.Client
	timeout time.Duration // of each request; 0: none
}

func (h naiveHop) get(ctx context.Context, url string) (answer, error) {
	var status int
	var err error
	//backstopvet:ignore retryloop (the naive side of the storm is this anti-pattern on purpose)
	for n := 1; n <= attempts; n++ {
		if n > 1 {
			select {
			case <-time.After(naiveBase << (n - 2)):
			case <-ctx.Done():
				return answer{}, ctx.Err()
			}
		}
		var res *http.Response
		actx, cancel := context.WithCancel(ctx)
		if h.timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, h.timeout)
		}
		req, _ := http.NewRequestWithContext(actx, "GET", url, nil)
		res, err = h.client.Do(req)
		if err == nil {
			drain(res)
			status = res.StatusCode
		}
		cancel()
		if err == nil && status < 500 && status != 429 {
			return answer{status: status}, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return answer{status: status}, err
}

// answer is what a hop passes up from the service below: its status, and the
// Retry-After, callpath.HeaderRefused and callpath.HeaderRetryAfterMillis it sent.
type answer struct {
	status                      int
	retryAfter, refused, millis string
}

// backstopHop sends through a Backstop pipeline; it owns no loop of its own.
type backstopHop struct{ client *http.Client }

func (h backstopHop) get(ctx context.Context, url string) (answer, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := h.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	drain(res)
	return answer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"),
		refused: res.Header.Get(callpath.HeaderRefused), millis: res.Header.Get(callpath.HeaderRetryAfterMillis)}, nil
}

func drain(res *http.Response) {
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}

// backstopPipeline is the one stack every Backstop layer uses, for the dependency
// named name: an overall deadline, a breaker, a token-bucket budget (gRPC's
// defaults), 4 attempts, and a per-attempt timeout. The breaker and the retry take
// their default Options: the breaker probes a down dependency about once a second
// and finds it back within 0.85 s; the retry backs off from 100 ms with full jitter.
// Their Rand is the run's seed. In owner-only mode the breaker and the budget are
// left out. obs counts the pipeline's events.
func backstopPipeline(m mode, name string, r jitter.Rand, obs event.Observer) (*policy.Pipeline, *breaker.Breaker) {
	d := policy.Must(deadline.New(deadline.Options{Timeout: callBudget}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: attempts, Rand: r}))
	per := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: hopTimeout}))
	if m == modeOwnerOnly {
		return policy.Must(policy.Wrap(d, rt, per, policy.Name(name), policy.Observe(obs))), nil
	}
	b := policy.Must(breaker.New(breaker.Options{Name: name, Rand: r}))
	bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	return policy.Must(policy.Wrap(d, b, bud, rt, per, policy.Name(name), policy.Observe(obs))), b
}

// stack is one run's four services on loopback.
type stack struct {
	servers []*http.Server
	clients []*http.Transport
	edge    string
	dbDown  atomic.Bool
	stop    chan struct{} // closed when the run ends: the database drops its queue
}

func listen(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return srv, "http://" + ln.Addr().String(), nil
}

// start builds edge → api → data → db for one run.
func start(cfg config, s *series) (*stack, error) {
	st := &stack{stop: make(chan struct{})}
	rnd := jitter.Seeded(cfg.seed, 1)

	var pool workers
	var db http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(s.db, time.Now())
		if st.dbDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		// The client's cancellation is not watched: the query runs anyway.
		begin := pool.reserve(time.Now())
		if !st.until(begin) {
			return
		}
		if st.dbDown.Load() {
			// Down means no query runs: one that waited for a worker fails when the
			// database goes down, wherever it waited (here, or in a shedder's queue
			// in front of the database).
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		end := begin.Add(dbWork) // the query itself
		if !st.until(end) {
			return
		}
		s.count(s.queries, end)
		w.WriteHeader(http.StatusOK)
	})
	if cfg.mode == modeBackstop {
		db = shed.Middleware(db, policy.Must(shed.New(shed.Options{Name: "db", Rand: rnd, Observer: &s.events})))
	}
	url, err := st.serve(db)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"data", "api", "edge"} {
		tr := &http.Transport{MaxIdleConnsPerHost: 512}
		st.clients = append(st.clients, tr)
		var h hop = naiveHop{client: &http.Client{Transport: tr}, timeout: cfg.hopTimeout}
		var brk *breaker.Breaker
		if cfg.mode != modeNaive {
			var p *policy.Pipeline
			p, brk = backstopPipeline(cfg.mode, name+"→below", rnd, &s.events)
			h = backstopHop{client: &http.Client{Transport: policyhttp.NewTransport(tr, p, policyhttp.Options{})}}
		}
		var handler http.Handler = forward(h, url, brk != nil)
		switch cfg.mode {
		case modeOwnerOnly:
			// Reads the attempt header: the handler's pipeline fails fast under an
			// owner upstream.
			handler = policyhttp.Middleware(handler)
		case modeBackstop:
			handler = shed.Middleware(handler, policy.Must(shed.New(shed.Options{Name: name, Breaker: brk, Rand: rnd, Observer: &s.events})))
		}
		if url, err = st.serve(handler); err != nil {
			return nil, err
		}
	}
	st.edge = url
	return st, nil
}

// workers is the database's pool: when each of its dbWorkers workers is next free. A
// query holds its worker for dbWork of wall time, first come first served, whatever
// this process's CPUs are doing: a database runs on a machine of its own, so CPU
// contention beside the storm delays the services' work and the answers' delivery,
// not the database's queries.
type workers struct {
	mu   sync.Mutex
	free [dbWorkers]time.Time
}

// reserve gives a query arriving at now the worker free first and returns when the
// query begins.
func (p *workers) reserve(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := 0
	for i := range p.free {
		if p.free[i].Before(p.free[w]) {
			w = i
		}
	}
	begin := p.free[w]
	if begin.Before(now) {
		begin = now
	}
	p.free[w] = begin.Add(dbWork)
	return begin
}

// until waits until t; it returns false if the run ends first.
func (st *stack) until(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-st.stop:
		return false
	}
}

func (st *stack) serve(h http.Handler) (string, error) {
	srv, url, err := listen(h)
	if err != nil {
		return "", err
	}
	st.servers = append(st.servers, srv)
	return url, nil
}

// forward is a middle service: it asks the service below and answers with its status
// and Retry-After. An open breaker is a 503 with the breaker's open time. When the
// service guards its dependency with a breaker (guarded), the refusals and failures it
// answers for that dependency say so in callpath.HeaderRefused: that breaker counts them,
// so the breakers and budgets of the services above do not count them again — one
// breaker per dependency, as there is one retry owner per call path.
func forward(h hop, next string, guarded bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := h.get(r.Context(), next)
		var rej *policy.RejectError
		switch {
		case errors.As(err, &rej):
			// Until the probe (when half-open, the time its probes are given), and the
			// probe's own time (about one request to the dependency).
			left := rej.RetryAfter
			a = answer{status: http.StatusServiceUnavailable, refused: "breaker",
				retryAfter: strconv.Itoa(max(1, int(math.Ceil(left.Seconds())))),
				millis:     strconv.FormatInt(max(1, (left+30*time.Millisecond).Milliseconds()), 10)}
		case err != nil:
			a.status = http.StatusBadGateway
		case guarded && a.status >= 500 && a.refused == "":
			a.refused = "dependency"
		}
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		if guarded && a.refused != "" {
			w.Header().Set(callpath.HeaderRefused, a.refused)
			if a.millis != "" {
				w.Header().Set(callpath.HeaderRetryAfterMillis, a.millis)
			}
		}
		w.WriteHeader(a.status)
	})
}

func (st *stack) close() {
	close(st.stop)
	for _, s := range st.servers {
		s.Close()
	}
	for _, c := range st.clients {
		c.CloseIdleConnections()
	}
}

// probe sends one user action while the database is down, with no user timeout and
// no per-request timeout, so that nothing cuts the retries short, and returns the
// requests that reached the database.
func probe(m mode, seed uint64) (int, error) {
	cfg := config{mode: m, seed: seed, bucket: time.Second, duration: time.Minute}
	s := newSeries(time.Now(), cfg.bucket, cfg.duration)
	st, err := start(cfg, s)
	if err != nil {
		return 0, err
	}
	defer st.close()
	st.dbDown.Store(true)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", st.edge, nil)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	drain(res)
	n := 0
	for _, c := range s.db {
		n += c
	}
	return n, nil
}

// run plays the scenario once and returns its series.
func run(cfg config, progress func()) (*series, error) {
	begin := time.Now()
	s := newSeries(begin, cfg.bucket, cfg.duration+userTimeout+time.Second)
	st, err := start(cfg, s)
	if err != nil {
		return nil, err
	}
	defer st.close()
	user := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer user.Transport.(*http.Transport).CloseIdleConnections()

	arrivals := rand.New(rand.NewPCG(cfg.seed, 2))
	var wg sync.WaitGroup
	outage := time.AfterFunc(cfg.down, func() { st.dbDown.Store(true) })
	recovery := time.AfterFunc(cfg.up, func() { st.dbDown.Store(false) })
	defer outage.Stop()
	defer recovery.Stop()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(cfg.bucket)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				progress()
			case <-done:
				return
			}
		}
	}()
	defer close(done)

	// Poisson arrivals at cfg.rate, from the seed.
	for next := begin; next.Sub(begin) < cfg.duration; next = next.Add(time.Duration(arrivals.ExpFloat64() / cfg.rate * float64(time.Second))) {
		time.Sleep(time.Until(next))
		wg.Add(1)
		go func(at time.Time) {
			defer wg.Done()
			userCall(user, st.edge, at, s)
		}(next)
	}
	wg.Wait()
	return s, nil
}

// userCall is one user action: a GET on the edge, given up after userTimeout.
func userCall(c *http.Client, edge string, at time.Time, s *series) {
	ctx, cancel := context.WithTimeout(context.Background(), userTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", edge, nil)
	res, err := c.Do(req)
	latency := time.Since(at)
	switch {
	case err != nil && ctx.Err() != nil:
		s.call(at, callLost, latency)
	case err != nil:
		s.call(at, callFailed, latency)
	default:
		drain(res)
		if res.StatusCode == http.StatusOK {
			s.call(at, callOK, latency)
		} else {
			s.call(at, callFailed, latency)
		}
	}
}
