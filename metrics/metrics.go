package metrics

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// Namespace prefixes every series.
const Namespace = "backstop"

// ErrInvalidOptions is matched by New's errors for bad Options.
var ErrInvalidOptions = errors.New("metrics: invalid options")

// Leveler is what a budget gauge reads: budget.TokenBucket, Ratio and Rate have it.
type Leveler interface{ Level() float64 }

// ShedGauges is what the shedder gauges read: shed.Shedder has it.
type ShedGauges interface {
	InFlight() int
	Limit() int
	QueueLen() int
}

// BreakerGauge is what the breaker gauge reads: breaker.Breaker has it.
type BreakerGauge interface {
	Name() string
	// StateValue is the state now: 0 closed, 1 half-open, 2 open.
	StateValue() float64
}

// CacheCounters is what the cache series read: coalesce.Cache has it.
type CacheCounters interface {
	CacheCounts() (hits, misses, coalesced, refreshes, stale, loadErrors uint64)
}

// Options configure an [Observer]. The zero value is valid.
type Options struct {
	// Buckets are the call-duration histogram's buckets in seconds; nil means
	// prometheus.DefBuckets.
	Buckets []float64
	// NativeHistograms adds native (sparse) histograms with this bucket factor, e.g.
	// 1.1, to both histograms; 0 means classic buckets only.
	NativeHistograms float64
	// Budgets are exported as backstop_budget_level{budget}, by name.
	Budgets map[string]Leveler
	// Shedders are exported as backstop_shed_inflight, _limit and _queue_length
	// {shedder}, by name. A shed.Shedder is also exported as
	// backstop_shed_admitted_total, and as backstop_shed_requests_total and
	// _retry_after_seconds of every refusal it makes. That holds whatever observer its
	// Options name (see [Observer.AddShedder]). A name must be the shedder's own
	// (shed.Options.Name).
	Shedders map[string]ShedGauges
	// Breakers are exported from the start. Their backstop_breaker_state{breaker} is
	// read at every scrape, so it is right after a Reset and present before any change.
	// Their backstop_breaker_transitions_total{breaker, from, to} starts at 0 for every
	// pair of states. A breaker inside a pipeline this Observer observes is exported
	// when the pipeline is bound, listed or not ([Observer.Register]). One in no such
	// pipeline (a shed.Options.Breaker, say) is exported only if listed or added.
	Breakers []BreakerGauge
}

// Observer is a event.Observer that keeps Prometheus series of every event. Its
// series are listed in the package documentation.
//
// An Observer is safe for concurrent use. Use one per registry, shared by every
// pipeline (set it with policy.Observe). Each pipeline gets its series resolved once,
// when it is bound (see [Observer.ForPipeline]). Build it with [New].
type Observer struct {
	callSeries   *callSeries // calls, attempts and their duration: the hot path
	retries      *prometheus.CounterVec
	suppressed   *prometheus.CounterVec
	deadlines    *prometheus.CounterVec
	breakerState *breakerStates
	transitions  *prometheus.CounterVec
	shed         *prometheus.CounterVec
	retryAfter   *prometheus.HistogramVec
	fleet        *prometheus.CounterVec
	panics       *prometheus.CounterVec
	admission    *admission // fallbacks, and every stage's rejections and waits

	pipelines sync.Map // pipeline name → *pipelineSeries
	reg       prometheus.Registerer

	knownMu sync.Mutex     // guards known
	known   map[string]any // what is exported under a name, by kind and name (see once)
	// stageHelp is the help of each backstop_stage_* family, by gauge name: the
	// first Help exported under the name. Guarded by knownMu.
	stageHelp map[string]string
	// listened holds the names of shedders whose refusals reach the Observer through
	// its shedListener. The same refusals reaching it another way are not counted.
	listened sync.Map
	listener *shedListener
}

// outcomes lists policy.Outcome's values in a fixed order, for pre-resolved series.
var outcomes = [...]string{policy.OutcomeSuccess, policy.OutcomeFailure, policy.OutcomeRejected, policy.OutcomeCanceled, policy.OutcomeDeadline}

func outcomeIndex(err error) int {
	if err == nil {
		return 0 // the common case, without a call
	}
	switch policy.Outcome(err) {
	case policy.OutcomeSuccess:
		return 0
	case policy.OutcomeFailure:
		return 1
	case policy.OutcomeRejected:
		return 2
	case policy.OutcomeCanceled:
		return 3
	}
	return 4
}

// New registers the Observer's collectors on reg and returns it. It never uses the
// global registry unless you pass it. A second Observer on the same registry fails with
// prometheus.AlreadyRegisteredError.
func New(reg prometheus.Registerer, o Options) (*Observer, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: the Registerer is nil", ErrInvalidOptions)
	}
	if o.NativeHistograms != 0 && o.NativeHistograms <= 1 {
		return nil, fmt.Errorf("%w: NativeHistograms is %v; want a bucket factor > 1, or 0", ErrInvalidOptions, o.NativeHistograms)
	}
	buckets := o.Buckets
	if buckets == nil {
		buckets = prometheus.DefBuckets
	}
	calls, err := newCallSeries(buckets, o.NativeHistograms)
	if err != nil {
		return nil, err
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m := &Observer{
		callSeries: calls,
		retries:    counter("retries_total", "Retries scheduled, by why the error was retryable (retryable, hint, throttle, timeout, network, custom, hedge).", "pipeline", "reason"),
		suppressed: counter("retries_suppressed_total", "Retries that would have happened and did not, by why (owner, budget, deadline, hint).", "pipeline", "why"),
		deadlines:  counter("deadlines_exceeded_total", "Calls or attempts whose deadline ran out, by kind (deadline, attempt_timeout).", "pipeline", "kind"),
		breakerState: &breakerStates{desc: prometheus.NewDesc(Namespace+"_breaker_state",
			"A breaker's state: 0 closed, 1 half-open, 2 open (read at scrape for registered breakers, else after the last change).",
			[]string{"breaker"}, nil), live: map[string]BreakerGauge{}, last: map[string]float64{}, seen: map[string]string{}},
		transitions: counter("breaker_transitions_total", "Breaker state changes.", "breaker", "from", "to"),
		shed:        counter("shed_requests_total", "Requests a shedder refused, by reason and priority.", "shedder", "reason", "priority"),
		retryAfter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "shed_retry_after_seconds",
			Help: "Retry-After sent with refusals.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
			NativeHistogramBucketFactor: o.NativeHistograms}, []string{"shedder"}),
		fleet:  counter("fleet_transitions_total", "Fleet policies moving between deciding on shared state (shared) and on their own when the store is out of reach (local).", "policy", "kind", "to"),
		panics: counter("panics_total", "Panics in user code recovered on goroutines Backstop started, by what started them (coalesce, hedge, redeliver/jetstream).", "pipeline", "source"),
	}
	cs := append(m.callSeries.collectors(), m.retries, m.suppressed, m.deadlines,
		m.breakerState, m.transitions, m.shed, m.retryAfter, m.fleet, m.panics)
	m.admission = newAdmission(o.NativeHistograms)
	cs = append(cs, m.admission.collectors()...)
	for name, b := range o.Budgets {
		cs = append(cs, budgetGauge(name, b))
	}
	for name, sh := range o.Shedders {
		if err := checkShedder(name, sh); err != nil {
			return nil, err
		}
		cs = append(cs, shedGauges(name, sh)...)
	}
	m.reg = reg
	m.known = map[string]any{}
	m.stageHelp = map[string]string{}
	m.listener = &shedListener{m}
	if err := m.register(cs...); err != nil {
		return nil, err
	}
	for name, b := range o.Budgets {
		m.known["budget\x00"+name] = b
	}
	for name, sh := range o.Shedders {
		m.known["shedder\x00"+name] = sh
		m.listen(name, sh)
	}
	for _, b := range o.Breakers {
		if err := m.AddBreaker(b); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// breakerStates is the backstop_breaker_state collector. Registered breakers are read
// live at each scrape; others report the state of their last transition.
type breakerStates struct {
	desc *prometheus.Desc
	mu   sync.Mutex              // guards the maps
	live map[string]BreakerGauge // registered breakers, by name
	last map[string]float64      // the state of the last transition, by breaker
	// seen is each breaker's last transition delivered, so that one transition
	// delivered to several pipelines sharing this Observer is counted once.
	seen map[string]string
}

func (c *breakerStates) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *breakerStates) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	values := make(map[string]float64, len(c.last)+len(c.live))
	for name, v := range c.last {
		values[name] = v
	}
	live := make(map[string]BreakerGauge, len(c.live))
	for name, b := range c.live {
		live[name] = b
	}
	c.mu.Unlock()
	for name, b := range live {
		values[name] = b.StateValue() // read outside our lock: it takes the breaker's
	}
	for name, v := range values {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// transition records a transition event, reporting false for one already recorded.
func (c *breakerStates) transition(e event.Event) bool {
	key := e.Time.String() + e.From + e.To
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[e.Source] == key {
		return false
	}
	c.seen[e.Source] = key
	c.last[e.Source] = stateValues[e.To]
	return true
}

// breakerStateNames are the states, as events name them.
var breakerStateNames = [...]string{"closed", "half_open", "open"}

// AddBreaker exports b's state from now on, read at every scrape, and its transition
// counters at 0. If b is an event.Source (breaker.Breaker is), it subscribes the
// Observer to b's transitions. So they are counted even if b is in no observed
// pipeline. Adding b again does nothing; another breaker under b's name is an error. A
// breaker in a pipeline the Observer observes needs no AddBreaker.
func (m *Observer) AddBreaker(b BreakerGauge) error {
	if b == nil {
		return fmt.Errorf("%w: AddBreaker(nil)", ErrInvalidOptions)
	}
	name := b.Name()
	m.breakerState.mu.Lock()
	if prev, ok := m.breakerState.live[name]; ok {
		m.breakerState.mu.Unlock()
		if prev == b {
			return nil
		}
		return fmt.Errorf("%w: another breaker is already added as %q", ErrInvalidOptions, name)
	}
	m.breakerState.live[name] = b
	m.breakerState.mu.Unlock()
	if src, ok := b.(event.Source); ok {
		src.Subscribe(m, "")
	}
	for _, from := range breakerStateNames {
		for _, to := range breakerStateNames {
			if from != to {
				m.transitions.WithLabelValues(name, from, to)
			}
		}
	}
	return nil
}

// register registers all of cs or, on an error, none.
func (m *Observer) register(cs ...prometheus.Collector) error {
	var registered []prometheus.Collector
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			for _, r := range registered {
				m.reg.Unregister(r)
			}
			return fmt.Errorf("metrics: %w", err)
		}
		registered = append(registered, c)
	}
	return nil
}

// AddBudget exports b as backstop_budget_level{budget=name}, for budgets built after
// the Observer. Adding b again does nothing. Another budget under name is an error.
func (m *Observer) AddBudget(name string, b Leveler) error {
	if b == nil {
		return fmt.Errorf("%w: AddBudget(%q, nil)", ErrInvalidOptions, name)
	}
	return m.once("budget", name, b, func() error { return m.register(budgetGauge(name, b)) })
}

// AddShedder exports s under shedder=name, as Options.Shedders does, for shedders built
// after the Observer. It exports its gauges. For a shed.Shedder it also exports its
// admissions and every refusal it makes (backstop_shed_requests_total,
// _retry_after_seconds). That covers refusals by its middleware, by Admit or in a
// pipeline. Each refusal is counted once, whether or not its Options.Observer or the
// pipeline's observer is this Observer too. The order of New, shed.New and AddShedder
// does not matter.
//
// Adding s again does nothing. Another shedder under name is an error. So is a name
// other than the shedder's own (shed.Options.Name), which its refusals are labelled
// with.
func (m *Observer) AddShedder(name string, s ShedGauges) error {
	if err := checkShedder(name, s); err != nil {
		return err
	}
	return m.once("shedder", name, s, func() error {
		if err := m.register(shedGauges(name, s)...); err != nil {
			return err
		}
		m.listen(name, s)
		return nil
	})
}

// checkShedder refuses a nil shedder and one registered under a name not its own.
func checkShedder(name string, s ShedGauges) error {
	if s == nil {
		return fmt.Errorf("%w: Shedders[%q] is nil", ErrInvalidOptions, name)
	}
	if n, ok := s.(named); ok && n.Name() != name {
		return fmt.Errorf("%w: Shedders[%q] is the shedder named %q; register a shedder under its own name, which labels its refusals", ErrInvalidOptions, name, n.Name())
	}
	return nil
}

// listen subscribes the Observer's listener to s's refusals, if s is an
// event.Source.
func (m *Observer) listen(name string, s ShedGauges) {
	if src, ok := s.(event.Source); ok {
		m.listened.Store(name, true)
		src.Subscribe(m.listener, "")
	}
}

func budgetGauge(name string, b Leveler) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "budget_level",
		Help:        "What a retry budget has left: tokens for a token bucket, retries that may start now otherwise.",
		ConstLabels: prometheus.Labels{"budget": name}}, b.Level)
}

func shedGauges(name string, s ShedGauges) []prometheus.Collector {
	labels := prometheus.Labels{"shedder": name}
	var cs []prometheus.Collector
	if a, ok := s.(interface{ Admitted() uint64 }); ok { // shed.Shedder: the share shed needs it
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "shed_admitted_total",
			Help: "Requests a shedder admitted.", ConstLabels: labels}, func() float64 { return float64(a.Admitted()) }))
	}
	return append(cs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "shed_inflight", Help: "Requests a shedder has admitted and not yet released.", ConstLabels: labels}, func() float64 { return float64(s.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "shed_limit", Help: "A shedder's current concurrency limit.", ConstLabels: labels}, func() float64 { return float64(s.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "shed_queue_length", Help: "Requests waiting in a shedder's queue.", ConstLabels: labels}, func() float64 { return float64(s.QueueLen()) }),
	)
}

func (m *Observer) pipeline(name string) *pipelineSeries {
	if s, ok := m.pipelines.Load(name); ok {
		return s.(*pipelineSeries)
	}
	s := m.callSeries.pipeline(name)
	// Counters of things that may not have happened yet exist at 0. So rate() and
	// alerts see a series from the start.
	for _, r := range retryReasons {
		m.retries.WithLabelValues(name, r)
	}
	for _, why := range suppressedReasons {
		m.suppressed.WithLabelValues(name, why)
	}
	for _, k := range deadlineKinds {
		m.deadlines.WithLabelValues(name, k)
	}
	actual, _ := m.pipelines.LoadOrStore(name, s)
	return actual.(*pipelineSeries)
}

// ForPipeline returns the Observer for the pipeline named name, with its series
// resolved now. Pipelines call it when they are bound (event.ForPipeline). So their
// calls and attempts are counted without any label lookup.
func (m *Observer) ForPipeline(name string) event.Observer {
	return &pipelineObserver{m: m, s: m.pipeline(name)}
}

type pipelineObserver struct {
	m *Observer
	s *pipelineSeries
}

// Needs says what the pipeline's series read. They read nothing of call and attempt
// starts. They read no clock for attempt ends and deadlines, which are counted, not
// timed. So a pipeline observed by metrics reads the clock twice per call, not six or
// seven times.
func (o *pipelineObserver) Needs(k event.Kind) event.Needs { return needs(k) }

// Needs says what the Observer reads; see pipelineObserver.Needs.
func (m *Observer) Needs(k event.Kind) event.Needs { return needs(k) }

func needs(k event.Kind) event.Needs {
	switch k {
	case event.CallStart, event.AttemptStart:
		return event.NeedsNothing
	case event.AttemptEnd, event.DeadlineExceeded:
		return event.NeedsEvent
	case event.CallEnd:
		return event.NeedsElapsed // the duration histogram; no wall time
	}
	return event.NeedsTiming
}

// CallEnded counts a call that ended with err after elapsed, as Observe counts its
// CallEnd event. Pipeline.Do calls it instead of building the event.
func (o *pipelineObserver) CallEnded(err error, elapsed time.Duration) {
	outcome := 0 // a success, without a call to outcomeIndex
	if err != nil {
		outcome = outcomeIndex(err)
	}
	o.s.call(outcome, elapsed)
}

// AttemptEnded counts an attempt that ended with err, as Observe counts its
// AttemptEnd event. A retry calls it instead of building the event.
func (o *pipelineObserver) AttemptEnded(err error) {
	outcome := 0
	if err != nil {
		outcome = outcomeIndex(err)
	}
	o.s.attempt(outcome)
}

func (o *pipelineObserver) Observe(e event.Event) {
	switch e.Kind {
	case event.CallStart, event.AttemptStart:
	case event.CallEnd:
		o.s.call(outcomeIndex(e.Err), e.Elapsed)
	case event.AttemptEnd:
		o.s.attempt(outcomeIndex(e.Err))
	default:
		o.m.Observe(e)
	}
}

var stateValues = map[string]float64{"closed": 0, "half_open": 1, "open": 2}

// The label values the counters of a pipeline are created with, at 0.
var (
	retryReasons      = [...]string{"retryable", "hint", "throttle", "timeout", "network", "custom", "hedge"}
	suppressedReasons = [...]string{event.SuppressedOwner, event.SuppressedBudget, event.SuppressedDeadline, event.SuppressedHint}
	deadlineKinds     = [...]string{deadline.Kind, deadline.KindAttempt}
)

// Observe records e.
func (m *Observer) Observe(e event.Event) {
	switch e.Kind {
	case event.CallEnd:
		m.pipeline(e.Pipeline).call(outcomeIndex(e.Err), e.Elapsed)
	case event.AttemptEnd:
		m.pipeline(e.Pipeline).attempt(outcomeIndex(e.Err))
	case event.RetryScheduled:
		m.retries.WithLabelValues(e.Pipeline, e.Reason).Inc()
	case event.RetrySuppressed:
		m.suppressed.WithLabelValues(e.Pipeline, e.Reason).Inc()
	case event.DeadlineExceeded:
		m.deadlines.WithLabelValues(e.Pipeline, e.Source).Inc()
	case event.BreakerState:
		if m.breakerState.transition(e) {
			m.transitions.WithLabelValues(e.Source, e.From, e.To).Inc()
		}
	case event.Shed:
		if _, ok := m.listened.Load(e.Source); !ok { // else counted by the listener
			m.countShed(e)
		}
	case event.Fleet:
		m.fleet.WithLabelValues(e.Source, e.Reason, e.To).Inc()
	case event.Panic:
		m.panics.WithLabelValues(e.Pipeline, e.Source).Inc()
	case event.Fallback, event.Rejected, event.Waited:
		m.admission.observe(e)
	}
}

// countShed counts a refusal.
func (m *Observer) countShed(e event.Event) {
	m.shed.WithLabelValues(e.Source, e.Reason, e.Priority).Inc()
	if e.Delay > 0 {
		m.retryAfter.WithLabelValues(e.Source).Observe(e.Delay.Seconds())
	}
}

// AddCache exports c's counters, read at every scrape:
//
//   - backstop_cache_requests_total{cache, result}, with result hit, miss, coalesced (a
//     miss that waited for another caller's load) and stale (a stale value served);
//   - backstop_cache_refreshes_total{cache};
//   - backstop_cache_load_errors_total{cache}.
//
// A name already exported is an error.
func (m *Observer) AddCache(name string, c CacheCounters) error {
	if c == nil {
		return fmt.Errorf("%w: AddCache(%q, nil)", ErrInvalidOptions, name)
	}
	pick := func(i int) func() float64 {
		return func() float64 {
			var v [6]uint64
			v[0], v[1], v[2], v[3], v[4], v[5] = c.CacheCounts()
			return float64(v[i])
		}
	}
	counter := func(metric, help string, labels prometheus.Labels, i int) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: metric, Help: help, ConstLabels: labels}, pick(i))
	}
	const reqHelp = "Gets of a coalescing cache, by result (hit, miss, coalesced, stale)."
	req := func(result string, i int) prometheus.Collector {
		return counter("cache_requests_total", reqHelp, prometheus.Labels{"cache": name, "result": result}, i)
	}
	return m.register(req("hit", 0), req("miss", 1), req("coalesced", 2), req("stale", 4),
		counter("cache_refreshes_total", "Origin loads of a coalescing cache.", prometheus.Labels{"cache": name}, 3),
		counter("cache_load_errors_total", "Origin loads of a coalescing cache that failed.", prometheus.Labels{"cache": name}, 5))
}
