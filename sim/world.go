package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// world is one run: the engine, the services and what they count.
type world struct {
	sc     Scenario
	tune   Tuning
	e      *engine
	clock  clock.Clock
	stages jitter.Rand // the stages' jitter
	start  time.Time
	svcs   []*service
	byName map[string]*service
	// inbound and outbound are the requests every service receives and its callers
	// send, less the context, the service's URL and Host (and inbound's headers): each
	// request is a copy of one, made by WithContext. One for all the services, they
	// stay in the processor's caches, as a service's own would not among thousands.
	// Nobody changes them: policyhttp's transport sends clones.
	inbound, outbound http.Request

	mu       sync.Mutex // guards what follows
	draws    *rand.Rand // service times and fault shares
	pending  int        // user calls not yet answered
	arriving bool       // arrivals are still to come
	rec      recorder
	users    users
}

// service is a Service at run time.
type service struct {
	w *world
	Service
	url     *url.URL
	slot    int // in a bucket's requests; -1: the series does not count the service's
	handler http.Handler
	hops    []*hop // one per Calls entry
	// mesh: its calls go through a mesh's retries, which know no call path owner.
	mesh bool
	// guarded by w.mu: the worker pool, and the requests received
	busy     int
	queue    []func() bool
	requests int
}

// hop is a service's client for one dependency.
type hop struct {
	to      *service
	client  http.RoundTripper
	naive   bool
	guarded bool // a breaker counts this dependency's failures
	breaker *breaker.Breaker
	w       *world
}

func newWorld(sc Scenario) (*world, error) {
	w := &world{sc: sc, tune: sc.Tuning.withDefaults(), e: newEngine(), start: time.Now(),
		inbound: http.Request{Method: http.MethodGet, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Body: http.NoBody, RemoteAddr: "sim", RequestURI: "/"},
		outbound: http.Request{Method: http.MethodGet, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}},
		stages:   jitter.Seeded(sc.Seed, 1), draws: rand.New(rand.NewPCG(sc.Seed, 3)),
		byName: make(map[string]*service, len(sc.Services)), svcs: make([]*service, len(sc.Services))}
	w.clock = w.e.Clock()
	if w.sc.Bucket == 0 {
		w.sc.Bucket = DefaultBucket
	}
	// Everything of a service is built in call order (see callOrder), and w.svcs keeps
	// the scenario's order.
	order := callOrder(sc)
	for _, i := range order {
		s := sc.Services[i]
		sv := &service{w: w, Service: s, url: &url.URL{Scheme: "http", Host: s.Name, Path: "/"}}
		if sv.Stack == "" {
			sv.Stack = sc.Stack
		}
		w.svcs[i] = sv
		w.byName[s.Name] = sv
	}
	w.rec.init(w)
	// A service's hops need only their targets' names.
	for _, i := range order {
		sv := w.svcs[i]
		for _, c := range sv.Calls {
			h, err := w.newHop(sv, w.byName[c])
			if err != nil {
				return nil, err
			}
			sv.hops = append(sv.hops, h)
		}
		sv.handler = sv.guard(http.HandlerFunc(sv.serve))
	}
	return w, nil
}

// callOrder returns the indices of sc's services in the order a depth-first walk
// from the entries along Calls first meets them, then those it never meets. A call
// goes down such a path, and newWorld builds each service's state in this order, so
// that what one call touches, service after service (breakers, shedders, pipelines,
// some 60 objects a service), lies close together in memory: objects of one size are
// allocated one after another. With thousands of services the state is far larger
// than the processor's caches and its address translation's reach, and the order
// saves a call most of its misses on the second. It changes nothing a run computes:
// building a service draws no random numbers.
func callOrder(sc Scenario) []int {
	index := make(map[string]int, len(sc.Services))
	for i, s := range sc.Services {
		index[s.Name] = i
	}
	seen := make([]bool, len(sc.Services))
	order := make([]int, 0, len(sc.Services))
	var stack []int
	walk := func(root int) {
		stack = append(stack[:0], root)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[i] {
				continue
			}
			seen[i] = true
			order = append(order, i)
			calls := sc.Services[i].Calls
			for k := len(calls) - 1; k >= 0; k-- { // the first dependency is walked first
				if j, ok := index[calls[k]]; ok && !seen[j] {
					stack = append(stack, j)
				}
			}
		}
	}
	if len(sc.Entries) == 0 && len(sc.Services) > 0 {
		walk(0)
	}
	for _, e := range sc.Entries {
		if i, ok := index[e]; ok {
			walk(i)
		}
	}
	for i := range sc.Services {
		if !seen[i] {
			walk(i)
		}
	}
	return order
}

// wire carries a request to a service's handler in the caller's goroutine. The
// service sees a fresh request: the caller's headers, and a context cancelled when the
// caller's is (as a server sees its client go away) but with none of its values or
// its deadline.
type wire struct{ to *service }

func (c wire) RoundTrip(req *http.Request) (*http.Response, error) {
	w := c.to.w
	if err := w.network(req.Context()); err != nil { // the request's way there
		return nil, err
	}
	// The service's context is the caller's, severed: done with context.Canceled when
	// the caller's is, without its deadline or values (the caller's call-path marks
	// stay in its process).
	x := &exchange{ctx: severed{req.Context()}}
	// The headers are the attempt's own: policyhttp's transport clones the request
	// for each attempt, and the services only read them.
	sreq := w.inbound.WithContext(&x.ctx)
	sreq.URL, sreq.Host, sreq.Header = c.to.url, c.to.Name, req.Header
	c.to.handler.ServeHTTP(&x.rw, sreq)
	if err := req.Context().Err(); err != nil {
		return nil, err // the caller went away before the answer
	}
	if err := w.network(req.Context()); err != nil { // the answer's way back
		return nil, err
	}
	status := x.rw.status
	if status == 0 {
		status = http.StatusOK
	}
	x.res = http.Response{Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: x.rw.header, Body: http.NoBody, Request: req}
	return &x.res, nil
}

// exchange is one request's context, its answer, written and returned: one
// allocation for all three.
type exchange struct {
	ctx severed
	rw  response
	res http.Response
}

// severed is a service's request context: done when its caller's is, as a server
// sees its client go away, with context.Canceled, but with none of the caller's
// values nor its deadline. Unlike a server's, it is not cancelled when the handler
// returns: nothing a simulated service starts outlives its answer.
//
// The contexts the stages derive from it, under the values the middleware and the
// transport add, learn that it is done through its AfterFunc method, which the
// values of package callpath pass on: they register with the caller's context, as
// they would with a cancel context, and start no goroutine to wait on Done.
type severed struct{ caller context.Context }

func (*severed) Deadline() (time.Time, bool)      { return time.Time{}, false }
func (c *severed) Done() <-chan struct{}          { return c.caller.Done() }
func (*severed) Value(any) any                    { return nil }
func (c *severed) AfterFunc(f func()) func() bool { return context.AfterFunc(c.caller, f) }
func (*severed) String() string                   { return "sim.severed" }

func (c *severed) Err() error {
	if c.caller.Err() != nil {
		return context.Canceled
	}
	return nil
}

// response is the http.ResponseWriter a service answers into: a status and headers
// (the simulated services send no body).
type response struct {
	header http.Header
	status int
}

func (r *response) Header() http.Header {
	if r.header == nil { // most answers set none
		r.header = http.Header{}
	}
	return r.header
}
func (r *response) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *response) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (w *world) newHop(from, to *service) (*hop, error) {
	h := &hop{to: to, w: w}
	base := wire{to}
	t := w.tune
	if from.Stack == Naive {
		h.naive = true
		h.client = base
		return h, nil
	}
	if fn := w.sc.Custom[from.Stack]; fn != nil {
		c, err := fn(Hop{From: from.Name, To: to.Name, Clock: w.clock, Rand: w.stages})
		switch {
		case err != nil:
			return nil, fmt.Errorf("sim: stack %s, %s→%s: %w", from.Stack, from.Name, to.Name, err)
		case c.Pipeline == nil:
			return nil, fmt.Errorf("sim: stack %s, %s→%s: no pipeline", from.Stack, from.Name, to.Name)
		}
		o := policyhttp.Options{Clock: w.clock, Classifier: c.Classifier}
		if c.Mesh {
			from.mesh, o.Mesh = true, callpath.MeshNone
		}
		h.client = policyhttp.NewTransport(base, c.Pipeline, o)
		return h, nil
	}
	name := from.Name + "→" + to.Name
	d := policy.Must(deadline.New(deadline.Options{Timeout: t.CallBudget}))
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: t.Attempts, Base: t.Base, Cap: time.Second, Rand: w.stages, Clock: w.clock}))
	per := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: t.HopTimeout}))
	var p *policy.Pipeline
	if from.Stack == OwnerOnly {
		p = policy.Must(policy.Wrap(d, rt, per, policy.Name(name), policy.UseClock(w.clock)))
	} else {
		h.breaker = policy.Must(breaker.New(breaker.Options{Name: name, OpenTimeout: t.BreakerOpen, MaxOpenTimeout: t.BreakerOpen,
			HalfOpenProbes: 3, Rand: w.stages}))
		h.guarded = true
		bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
		var again policy.Policy = rt
		if t.Hedge > 0 {
			again = policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: t.Hedge, Clock: w.clock}))
		}
		p = policy.Must(policy.Wrap(d, h.breaker, bud, again, per, policy.Name(name), policy.UseClock(w.clock)))
	}
	h.client = policyhttp.NewTransport(base, p, policyhttp.Options{Clock: w.clock})
	return h, nil
}

// guard puts the service's own protection around its handler.
func (s *service) guard(h http.Handler) http.Handler {
	switch s.Stack {
	case Naive:
		return h
	case OwnerOnly:
		return policyhttp.Middleware(h)
	case Backstop:
		var brk *breaker.Breaker
		if len(s.hops) > 0 {
			brk = s.hops[0].breaker
		}
		return shed.Middleware(h, policy.Must(shed.New(shed.Options{Name: s.Name, Breaker: brk, Rand: s.w.stages, Clock: s.w.clock})))
	}
	if s.mesh {
		return h // a mesh's retries: no owner is read
	}
	return policyhttp.Middleware(h) // a custom stack
}

// answer is what a hop passes up: the status and the headers that matter.
type answer struct {
	status                      int
	retryAfter, refused, millis string
}

func (h *hop) get(ctx context.Context) (answer, error) {
	if !h.naive {
		return h.once(ctx)
	}
	t := h.w.tune
	var a answer
	var err error
	for n := 1; n <= t.Attempts; n++ {
		if n > 1 {
			tm := h.w.clock.NewTimer(t.Base << (n - 2))
			select {
			case <-tm.C():
			case <-ctx.Done():
				tm.Stop()
				return answer{}, ctx.Err()
			}
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !t.NoHopTimeout {
			actx, cancel = context.WithTimeout(ctx, t.HopTimeout)
		}
		a, err = h.once(actx)
		cancel()
		if err == nil && a.status < 500 && a.status != http.StatusTooManyRequests {
			return a, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return a, err
}

// request returns a request to s under ctx, as its callers send it.
func (s *service) request(ctx context.Context) *http.Request {
	r := s.w.outbound.WithContext(ctx)
	r.URL, r.Host = s.url, s.Name
	return r
}

func (h *hop) once(ctx context.Context) (answer, error) {
	res, err := h.client.RoundTrip(h.to.request(ctx))
	if err != nil {
		return answer{}, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return answer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"),
		refused: res.Header.Get(callpath.HeaderRefused), millis: res.Header.Get(callpath.HeaderRetryAfterMillis)}, nil
}

// fault is the state of a service's faults at one time.
type faultNow struct {
	refuse     float64 // share answered 503 at once
	retryAfter time.Duration
	factor     float64
}

func (s *service) faultAt(t time.Duration) faultNow {
	f := faultNow{factor: 1}
	for _, ft := range s.Faults {
		weight := 0.0
		switch {
		case t >= ft.From && t < ft.To:
			weight = 1
		case t >= ft.To && t < ft.To+ft.Recover:
			weight = 1 - float64(t-ft.To)/float64(ft.Recover)
		}
		if weight == 0 {
			continue
		}
		switch ft.Kind {
		case Down:
			f.refuse = max(f.refuse, weight)
		case Erroring:
			f.refuse = max(f.refuse, weight*ft.Rate)
			f.retryAfter = max(f.retryAfter, ft.RetryAfter)
		case Slow:
			f.factor = max(f.factor, 1+weight*(ft.Factor-1))
		}
	}
	return f
}

// rejection returns how long a refusal on the call path (a breaker open) asks the
// caller to wait, and whether err is one. Asked only of errors: the variable that
// errors.As fills is on the heap.
func rejection(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var rej *policy.RejectError
	if !errors.As(err, &rej) {
		return 0, false
	}
	return rej.RetryAfter, true
}

var (
	errQueueFull = errors.New("sim: queue full")
	errDown      = errors.New("sim: down")
)

// serve is the service's own handler: the fault schedule, its work on a worker, then
// its dependencies one after another, answering as the storm's middle services do.
func (s *service) serve(rw http.ResponseWriter, r *http.Request) {
	w := s.w
	now := time.Since(w.start)
	w.mu.Lock()
	w.rec.request(s, now)
	f := s.faultAt(now)
	refuse := f.refuse > 0 && (f.refuse >= 1 || w.draws.Float64() < f.refuse)
	w.mu.Unlock()
	if refuse {
		if f.retryAfter > 0 {
			rw.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(f.retryAfter.Seconds())))))
		}
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	switch {
	case s.Workers > 0:
		if err := s.work(r.Context(), f.factor); err != nil {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	case s.Work.Mean > 0: // latency-bound: no limit, each request takes its time
		w.mu.Lock()
		d := time.Duration(float64(w.draw(s.Work)) * f.factor)
		w.mu.Unlock()
		tm := w.clock.NewTimer(d)
		select {
		case <-tm.C():
		case <-r.Context().Done():
			tm.Stop()
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	for _, h := range s.hops {
		a, err := h.get(r.Context())
		switch left, refused := rejection(err); {
		case refused:
			a = answer{status: http.StatusServiceUnavailable, refused: "breaker",
				retryAfter: strconv.Itoa(max(1, int(math.Ceil(left.Seconds())))),
				millis:     strconv.FormatInt(max(1, (left+30*time.Millisecond).Milliseconds()), 10)}
		case err != nil:
			a.status = http.StatusBadGateway
		case h.guarded && a.status >= 500 && a.refused == "":
			a.refused = "dependency"
		}
		if a.status == http.StatusOK {
			continue
		}
		if a.retryAfter != "" {
			rw.Header().Set("Retry-After", a.retryAfter)
		}
		if h.guarded && a.refused != "" {
			rw.Header().Set(callpath.HeaderRefused, a.refused)
			if a.millis != "" {
				rw.Header().Set(callpath.HeaderRetryAfterMillis, a.millis)
			}
		}
		rw.WriteHeader(a.status)
		return
	}
	rw.WriteHeader(http.StatusOK)
}

// work waits for a worker and holds it for one service time. The worker is held to
// the end even if ctx is done first: the caller stops waiting, the work goes on.
func (s *service) work(ctx context.Context, factor float64) error {
	w := s.w
	done := make(chan struct{})
	down := false // the service went down while the request waited for a worker
	w.mu.Lock()
	run := func() { // w.mu held
		d := time.Duration(float64(w.draw(s.Work)) * factor)
		w.e.After(d, func() {
			close(done)
			w.mu.Lock()
			s.next()
			w.mu.Unlock()
		})
	}
	switch {
	case s.busy < s.Workers:
		// A worker is free at once: serve has just found the service up.
		s.busy++
		run()
	case s.Queue > 0 && len(s.queue) >= s.Queue:
		w.mu.Unlock()
		return errQueueFull
	default:
		// The request waits for a worker. When one frees it runs, unless the service
		// has gone down meanwhile: a service that is down runs nothing, and the request
		// fails at once.
		s.queue = append(s.queue, func() bool { // w.mu held
			if s.faultAt(time.Since(w.start)).refuse >= 1 {
				down = true
				close(done)
				return false
			}
			run()
			return true
		})
	}
	w.mu.Unlock()
	select {
	case <-done:
		if down {
			return errDown
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next hands a freed worker to the first queued request that runs, or frees it.
// w.mu must be held.
func (s *service) next() {
	for len(s.queue) > 0 {
		start := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if start() {
			return
		}
	}
	s.busy--
}

// draw returns a time from d; w.mu must be held.
func (w *world) draw(d Dist) time.Duration {
	if d.Exponential {
		return time.Duration(w.draws.ExpFloat64() * float64(d.Mean))
	}
	return d.Mean
}

// network waits one way's network delay (Scenario.Network), or until ctx is done.
func (w *world) network(ctx context.Context) error {
	if w.sc.Network.Mean == 0 {
		return nil
	}
	w.mu.Lock()
	d := w.draw(w.sc.Network)
	w.mu.Unlock()
	tm := w.clock.NewTimer(d)
	select {
	case <-tm.C():
		return nil
	case <-ctx.Done():
		tm.Stop()
		return ctx.Err()
	}
}
