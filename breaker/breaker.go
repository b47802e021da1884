package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/sony/gobreaker/v2"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	// DefaultConsecutiveFailures trips the breaker after 5 failures in a row. The
	// default of gobreaker itself trips after more than 5, that is 6.
	DefaultConsecutiveFailures = 5
	// DefaultOpenTimeout is the probe interval. An open breaker lets a probe
	// through 750 ms after it tripped (825 ms with its jitter). It lets another
	// through every 750 to 825 ms while probes fail. A probe that hangs does not
	// hold the next one back. So a dependency back from an outage of any length
	// gets traffic within 0.85 s. A dead one sees about 1.25 probes a second from
	// each process.
	DefaultOpenTimeout = 750 * time.Millisecond
	// DefaultMaxOpenTimeout bounds the open time that failed probes lengthen. By
	// default it does not grow (MaxOpenTimeout = OpenTimeout). Set MaxOpenTimeout
	// above OpenTimeout to probe a long outage ever more rarely, as Envoy's
	// outlier detection lengthens an ejection. The cost is finding the dependency
	// back later.
	DefaultMaxOpenTimeout = DefaultOpenTimeout
	// DefaultMinRequests is the calls a window needs before FailureRatio can trip it.
	DefaultMinRequests = 20
	// DefaultWindow is the rolling window of ratio mode.
	DefaultWindow = 10 * time.Second
	// DefaultBuckets is how many buckets the rolling window rolls by.
	DefaultBuckets = 10
	// DefaultHalfOpenProbes is the calls let through while half-open.
	DefaultHalfOpenProbes = 1
	// SlowStartMinShare is the share of calls a breaker in slow start
	// (Options.SlowStart) lets through the moment it closes.
	SlowStartMinShare = 0.1
	// DefaultOpenJitter lengthens each open period by up to 10 % at random. One
	// outage opens the breakers of many clients. With jitter, they do not re-probe
	// the recovering dependency in lockstep.
	DefaultOpenJitter = 0.1
)

// The reasons a breaker gives in its policy.RejectError.
const (
	ReasonOpen      = "open"       // open: no probe may go until RetryAfter has passed
	ReasonHalfOpen  = "half_open"  // half-open, and its probes are out
	ReasonForced    = "forced"     // forced open by an operator (ForceOpen)
	ReasonSlowStart = "slow_start" // just closed, and its slow start holds the call back
)

var (
	// ErrOpen is matched by every refusal of a breaker. A refusal is a
	// *policy.RejectError whose Err is ErrOpen. It matches policy.ErrRejected too.
	ErrOpen = errors.New("breaker: open")
	// ErrInvalidOptions is matched by New's errors for bad Options.
	ErrInvalidOptions = errors.New("breaker: invalid options")
)

// Options configure a [Breaker]. The zero value is valid. It trips after 5
// consecutive failures. It then lets 1 probe through every 750 to 825 ms until one
// succeeds.
//
// There are two ways to trip, one at a time. The default is consecutive failures.
// When FailureRatio is set, it is a failure ratio over a rolling Window. That ratio
// counts once MinRequests calls have been seen in the window.
type Options struct {
	// Name names the breaker in events, metrics and errors. Required.
	Name string
	// ConsecutiveFailures trips the breaker after this many failures in a row. 0
	// means DefaultConsecutiveFailures (5). Not allowed with FailureRatio.
	ConsecutiveFailures uint32
	// FailureRatio, in (0, 1], switches to ratio mode. The breaker then trips when
	// failures/(failures+successes) ≥ FailureRatio over the last Window. 0 means
	// consecutive mode.
	FailureRatio float64
	// MinRequests is the counted calls the window needs before the ratio can trip.
	// 0 means DefaultMinRequests (20). Ratio mode only.
	MinRequests uint32
	// Window is the rolling window of ratio mode; 0 means DefaultWindow (10 s).
	Window time.Duration
	// Buckets is how many steps the window rolls by. gobreaker's BucketPeriod is
	// Window/Buckets. 0 means DefaultBuckets (10). Ratio mode only.
	Buckets int
	// OpenTimeout is the probe interval. It is how long the breaker stays open when
	// it trips. It is also how long after a probe went out the next may go, whether
	// or not the first has answered. 0 means DefaultOpenTimeout (750 ms). If
	// MaxOpenTimeout is longer, each failed probe doubles the interval up to it.
	// Closing starts it again at OpenTimeout.
	OpenTimeout time.Duration
	// MaxOpenTimeout bounds the interval failed probes lengthen, before OpenJitter.
	// 0 means OpenTimeout, or DefaultMaxOpenTimeout (750 ms) if that is longer. By
	// default, the interval never grows. Below OpenTimeout is refused. A breaker
	// forced open reports it as its Retry-After.
	MaxOpenTimeout time.Duration
	// OpenJitter lengthens each interval by a random share of it in
	// [0, OpenJitter). With the defaults, probes go 750 to 825 ms apart. It is drawn
	// once per interval, so a refusal's RetryAfter says the real time. 0 means
	// DefaultOpenJitter (0.1). Negative means none. Above 1 is refused.
	OpenJitter float64
	// Rand draws the open jitter; nil means jitter.System().
	Rand jitter.Rand
	// HalfOpenProbes is how many calls the breaker lets through each probe
	// interval. That many successes in a row close it. A failure waits for the next
	// interval. 0 means 1.
	HalfOpenProbes uint32
	// SlowStart, if > 0, ramps the traffic up after the breaker closes from
	// half-open. The calls held back while it was open then do not all reach a
	// dependency that has just come back. For SlowStart, a share of the calls goes
	// through. That share grows linearly from SlowStartMinShare (10 %) to all of
	// them. The others are refused at once, with reason ReasonSlowStart. Their
	// RetryAfter is a tenth of SlowStart. This is Envoy's slow start mode, linear. A
	// failure during the ramp counts as in the closed state. 0 means off, the
	// default; the package documentation says why. Negative is refused.
	SlowStart time.Duration
	// SlowCall, if > 0, counts a slow success as a failure. That is a call (inside
	// a retry: an attempt) that took longer than SlowCall. resilience4j's
	// slowCallDurationThreshold does the same. A dependency that answers too slowly
	// then trips the breaker like one that fails. In ratio mode, slow calls count
	// toward FailureRatio. The caller still gets its success. 0 means off; negative
	// is refused.
	SlowCall time.Duration
	// IsSuccessful says whether a call's error counts as a success. Nil means only
	// a nil error does.
	IsSuccessful func(error) bool
	// IsExcluded says whether a call's error says nothing about the dependency's
	// health. Such an error is counted neither way. Nil means DefaultIsExcluded.
	IsExcluded func(error) bool
	// OnStateChange is called after every state change, outside every lock. It may
	// read the breaker. It must be safe for concurrent use.
	OnStateChange func(name string, from, to State)
}

// DefaultIsExcluded excludes the errors that say nothing about a dependency's
// health:
//   - the caller's cancellation (context.Canceled);
//   - refusals by policies (policy.ErrRejected): another breaker, a shedder, a
//     budget;
//   - client faults marked with fault.Client. A 4xx says the request was bad, not
//     the server.
func DefaultIsExcluded(err error) bool {
	if err == nil {
		return false // the success path allocates nothing
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, policy.ErrRejected) {
		return true
	}
	return fault.Of(err).Client
}

// State is a breaker's state. Its values are those of the backstop_breaker_state
// metric: 0 closed, 1 half-open, 2 open. Its names in events, labels and JSON are
// those of [State.String].
type State int

// The states of a breaker.
const (
	StateClosed   State = State(gobreaker.StateClosed)
	StateHalfOpen State = State(gobreaker.StateHalfOpen)
	StateOpen     State = State(gobreaker.StateOpen)
)

// stateNames are the states' names. gobreaker says "half-open"; Backstop's label
// values are snake_case.
var stateNames = [...]string{StateClosed: "closed", StateHalfOpen: "half_open", StateOpen: "open"}

// String returns "closed", "half_open" or "open".
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return gobreaker.State(s).String() // "unknown state: n"
}

// Counts are the breaker's counts in the current state. In ratio mode, they are
// within the rolling window.
type Counts struct {
	Requests             uint32 `json:"requests"`
	TotalSuccesses       uint32 `json:"total_successes"`
	TotalFailures        uint32 `json:"total_failures"`
	TotalExclusions      uint32 `json:"total_exclusions"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`
}

// Transition is one state change.
type Transition struct {
	From State     `json:"-"`
	To   State     `json:"-"`
	At   time.Time `json:"at"`
}

// Breaker is a circuit breaker (Placement.Kind [Kind]) on
// github.com/sony/gobreaker/v2. Outside a retry, it counts calls. When open, it
// stops a call before any attempt. Inside a retry, it counts attempts. Either way,
// an open breaker ends the call at once. Its error is a *policy.RejectError that
// matches [ErrOpen].
//
// Backstop adds to gobreaker what a server and an operator need:
//   - the time the breaker opened and will let probes through (gobreaker keeps it
//     private);
//   - state changes delivered outside gobreaker's mutex;
//   - inspection;
//   - ForceOpen and Reset.
//
// A Breaker is safe for concurrent use. Several pipelines may share one, and so
// share its state. Package gobreaker reads time.Now, so tests of timing use
// testing/synctest. Build it with [New]; the zero value is not usable.
type Breaker struct {
	// What every call reads comes first, so that it shares one cache line. A
	// process may hold many breakers: a service per dependency, many services in a
	// process. A call then finds few of them in the cache.
	forced  atomic.Bool
	pending atomic.Bool // transitions wait in queue
	cb      atomic.Pointer[gobreaker.CircuitBreaker[struct{}]]
	// open is non-nil exactly while the breaker is open (not forced). Its until,
	// read without a lock, is when probes may go through.
	open atomic.Pointer[episode]
	// rampFrom is when the breaker last closed from half-open, while its slow start
	// lasts. It is in nanoseconds since epoch: monotonic, plus one so that it is
	// never 0. Otherwise it is 0. rampErr is the refusal of a call the ramp holds
	// back.
	rampFrom atomic.Int64
	slow     time.Duration

	name       string
	settings   gobreaker.Settings
	timeout    time.Duration // the first open time
	maxTimeout time.Duration // the longest
	jitter     float64
	rand       jitter.Rand
	onChange   func(name string, from, to State)
	trip       string // when it trips, for ExplainStage
	slowStart  time.Duration

	gens atomic.Uint64 // the last generation handed out

	epoch time.Time

	// The refusals whose RetryAfter never changes, built once. Refusing so
	// allocates nothing. An open episode keeps its own (see [episode]).
	rampErr, halfOpenErr, forcedErr *policy.RejectError
	tripped                         atomic.Pointer[Counts] // the counts that last tripped it

	subsMu sync.Mutex                // guards subs
	subs   map[event.Observer]string // who hears of transitions, under which pipeline name

	mu       sync.Mutex // guards the fields below
	gen      uint64     // which gobreaker instance is current (Reset makes a new one)
	state    State      // as of the last transition
	reopens  int        // failed probes since the breaker last closed
	turnLeft uint32     // probes the current probe interval may still let through
	probeOK  uint32     // probes that succeeded in a row since the breaker opened
	openedAt time.Time
	until    time.Time // when an open breaker lets probes through (jitter included)
	last     Transition
	queue    []Transition // to deliver, outside every lock
}

// New returns a closed breaker named o.Name; the name labels its events and
// metrics. Or it returns an error that matches ErrInvalidOptions. The error joins
// one error per bad field, each naming its field. Unlike gobreaker, New never
// clamps a bad value silently.
func New(o Options) (*Breaker, error) {
	name := o.Name
	if err := validate(name, o); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s, trip := settings(name, o)
	b := &Breaker{
		name:        name,
		settings:    s,
		timeout:     o.OpenTimeout,
		maxTimeout:  o.MaxOpenTimeout,
		jitter:      o.OpenJitter,
		rand:        jitter.Or(o.Rand),
		onChange:    o.OnStateChange,
		trip:        trip,
		slow:        o.SlowCall,
		slowStart:   o.SlowStart,
		epoch:       time.Now(),
		rampErr:     newRefusal(name, ReasonSlowStart, o.SlowStart/10),
		halfOpenErr: newRefusal(name, ReasonHalfOpen, o.OpenTimeout),
		forcedErr:   newRefusal(name, ReasonForced, o.MaxOpenTimeout),
	}
	// Keep the counts that trip the breaker: gobreaker clears them as it opens.
	ready := s.ReadyToTrip
	b.settings.ReadyToTrip = func(c gobreaker.Counts) bool {
		if !ready(c) {
			return false
		}
		tc := Counts(c)
		b.tripped.Store(&tc)
		return true
	}
	b.cb.Store(b.newCircuit())
	return b, nil
}

// validate returns every problem of name and o, or nil if there is none. It joins
// one error per bad field. Each matches ErrInvalidOptions and names the field.
func validate(name string, o Options) error {
	prefix := ErrInvalidOptions
	if name != "" {
		prefix = fmt.Errorf("%w: %s", ErrInvalidOptions, name)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, check.Err(prefix, format, args...))
	}
	if name == "" {
		bad("the name is empty; want the dependency's name")
	}
	if o.FailureRatio == 0 {
		validateConsecutive(o, bad)
	} else {
		validateRatio(o, bad)
	}
	d := o.withDefaults() // what the checks between fields compare
	if o.OpenTimeout < 0 {
		bad("OpenTimeout is %v; want > 0, or 0 for the default %v", o.OpenTimeout, DefaultOpenTimeout)
	}
	switch {
	case o.MaxOpenTimeout < 0:
		bad("MaxOpenTimeout is %v; want ≥ OpenTimeout, or 0 for the default %v", o.MaxOpenTimeout, DefaultMaxOpenTimeout)
	case o.MaxOpenTimeout > 0 && o.MaxOpenTimeout < d.OpenTimeout:
		bad("MaxOpenTimeout is %v, below OpenTimeout %v; want MaxOpenTimeout ≥ OpenTimeout", o.MaxOpenTimeout, d.OpenTimeout)
	}
	if !(o.OpenJitter <= 1) { // NaN too
		bad("OpenJitter is %v; want a fraction in [0, 1], 0 for the default %v, or negative for none", o.OpenJitter, DefaultOpenJitter)
	}
	if o.SlowStart < 0 {
		bad("SlowStart is %v; want > 0, or 0 for none", o.SlowStart)
	}
	if o.SlowCall < 0 {
		bad("SlowCall is %v; want > 0, or 0 for none", o.SlowCall)
	}
	return errors.Join(errs...)
}

// validateConsecutive reports, through bad, the ratio-mode fields set in
// consecutive mode.
func validateConsecutive(o Options, bad func(format string, args ...any)) {
	if o.MinRequests != 0 {
		bad("MinRequests is set without FailureRatio; it applies to ratio mode only")
	}
	if o.Window != 0 {
		bad("Window is set without FailureRatio; it applies to ratio mode only")
	}
	if o.Buckets != 0 {
		bad("Buckets is set without FailureRatio; it applies to ratio mode only")
	}
}

// validateRatio reports, through bad, the problems of ratio mode's fields.
func validateRatio(o Options, bad func(format string, args ...any)) {
	if math.IsNaN(o.FailureRatio) || o.FailureRatio < 0 || o.FailureRatio > 1 {
		bad("FailureRatio is %v; want a number in (0, 1]", o.FailureRatio)
	}
	if o.ConsecutiveFailures != 0 {
		bad("ConsecutiveFailures and FailureRatio are both set; choose one way to trip")
	}
	if o.Window < 0 {
		bad("Window is %v; want > 0, or 0 for the default %v", o.Window, DefaultWindow)
	}
	if o.Buckets < 0 {
		bad("Buckets is %d; want ≥ 1, or 0 for the default %d", o.Buckets, DefaultBuckets)
	}
	if d := o.withDefaults(); o.Window >= 0 && o.Buckets >= 0 && d.Window/time.Duration(d.Buckets) <= 0 {
		bad("Window %v is shorter than %d buckets of 1ns", d.Window, d.Buckets)
	}
}

// withDefaults returns o with its zero fields set to their defaults. A negative
// OpenJitter becomes 0. Fields of the mode o does not use stay as they are.
func (o Options) withDefaults() Options {
	if o.OpenTimeout == 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.MaxOpenTimeout == 0 {
		o.MaxOpenTimeout = max(DefaultMaxOpenTimeout, o.OpenTimeout)
	}
	if o.HalfOpenProbes == 0 {
		o.HalfOpenProbes = DefaultHalfOpenProbes
	}
	switch {
	case o.OpenJitter == 0:
		o.OpenJitter = DefaultOpenJitter
	case o.OpenJitter < 0:
		o.OpenJitter = 0
	}
	if o.FailureRatio == 0 {
		if o.ConsecutiveFailures == 0 {
			o.ConsecutiveFailures = DefaultConsecutiveFailures
		}
		return o
	}
	if o.MinRequests == 0 {
		o.MinRequests = DefaultMinRequests
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Buckets == 0 {
		o.Buckets = DefaultBuckets
	}
	return o
}

// settings returns the gobreaker settings of a breaker named name on o. It also
// returns how it trips, for ExplainStage. o must be valid, with its defaults set.
func settings(name string, o Options) (gobreaker.Settings, string) {
	s := gobreaker.Settings{
		Name:         name,
		MaxRequests:  o.HalfOpenProbes,
		Timeout:      neverHalfOpen, // the breaker probes by itself: see [Breaker.probe]
		IsSuccessful: o.IsSuccessful,
		IsExcluded:   o.IsExcluded,
	}
	if s.IsExcluded == nil {
		s.IsExcluded = DefaultIsExcluded
	}
	if o.SlowCall > 0 {
		// A slow success is a failure, whatever the user's functions say of errors.
		excluded, successful := s.IsExcluded, s.IsSuccessful
		s.IsExcluded = func(err error) bool { return err != errSlow && excluded(err) }
		s.IsSuccessful = func(err error) bool {
			if err == errSlow {
				return false
			}
			if successful == nil {
				return err == nil
			}
			return successful(err)
		}
	}
	if o.FailureRatio == 0 {
		n := o.ConsecutiveFailures
		s.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n }
		return s, fmt.Sprintf("trips after %d failures in a row", n)
	}
	ratio, min := o.FailureRatio, o.MinRequests
	s.Interval = o.Window
	s.BucketPeriod = o.Window / time.Duration(o.Buckets)
	s.ReadyToTrip = func(c gobreaker.Counts) bool {
		n := c.TotalFailures + c.TotalSuccesses
		return n >= min && float64(c.TotalFailures) >= ratio*float64(n)
	}
	trip := fmt.Sprintf("trips when %v%% or more of the calls of the last %v fail, once %d are counted", ratio*100, o.Window, min)
	return s, trip
}

// newCircuit returns a fresh gobreaker instance, made the current generation. Its
// caller holds mu, or b is not yet shared.
func (b *Breaker) newCircuit() *gobreaker.CircuitBreaker[struct{}] {
	b.gen = b.gens.Add(1)
	return b.circuit(b.gen, b.settings)
}

// circuit returns a gobreaker instance on s whose state changes are queued for
// generation gen only.
func (b *Breaker) circuit(gen uint64, s gobreaker.Settings) *gobreaker.CircuitBreaker[struct{}] {
	// gobreaker calls OnStateChange under its own mutex: only queue here.
	s.OnStateChange = func(_ string, from, to gobreaker.State) { b.record(gen, State(from), State(to)) }
	return gobreaker.NewCircuitBreaker[struct{}](s)
}

// errSlow is what gobreaker is told of a call that succeeded slower than SlowCall.
var errSlow = errors.New("breaker: slow call")

// errAdopted is the one failure that trips the fresh circuit of [Breaker.OpenUntil].
var errAdopted = errors.New("breaker: opened elsewhere")

// OpenUntil opens the breaker until until, as if it had tripped then, with fresh
// counts. Calls are refused until until. After it, the breaker is half-open and
// lets its probes through, as after a trip of its own. OpenUntil is how a breaker
// adopts a state decided elsewhere. The breakers of other processes that share it
// decide it: the fleet module. A breaker forced open is left as it is. So is one
// already open until until or later. An until not after now does nothing. An open
// breaker whose until is earlier is held open longer, without a new transition.
// Otherwise, the change is reported like any other.
func (b *Breaker) OpenUntil(until time.Time) {
	now := time.Now()
	if b.forced.Load() || !now.Before(until) {
		return
	}
	if e := b.open.Load(); e != nil && !e.until.Before(until) {
		return
	}
	// A fresh circuit, tripped by one failure before it is installed. Its own
	// report of that trip is dropped: its generation is not current yet. Package
	// gobreaker half-opens it at until. The refusals before then are this
	// breaker's own.
	gen := b.gens.Add(1)
	s := b.settings
	adopting := true
	ready, excluded, successful := s.ReadyToTrip, s.IsExcluded, s.IsSuccessful
	s.ReadyToTrip = func(c gobreaker.Counts) bool { return adopting || ready(c) }
	s.IsExcluded = func(err error) bool { return !adopting && excluded(err) }
	s.IsSuccessful = func(err error) bool {
		if adopting || successful == nil {
			return err == nil && !adopting
		}
		return successful(err)
	}
	cb := b.circuit(gen, s)
	_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, errAdopted })
	adopting = false

	b.mu.Lock()
	if e := b.open.Load(); b.forced.Load() || (e != nil && !e.until.Before(until)) {
		b.mu.Unlock()
		return // forced or opened longer meanwhile
	}
	if b.state == StateOpen && now.Before(b.until) {
		b.until = until // already open: only held longer
		b.open.Store(&episode{until: until})
	} else {
		from := b.stateLocked(now)
		b.transitionLocked(from, StateOpen, now)
		b.until = until
		b.open.Store(&episode{until: until})
	}
	b.gen = gen
	b.cb.Store(cb)
	b.mu.Unlock()
	b.deliver()
}

// record queues a transition reported by gobreaker instance gen.
func (b *Breaker) record(gen uint64, from, to State) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen != b.gen {
		return // a call still running on an instance Reset replaced
	}
	b.transitionLocked(from, to, now)
}

func (b *Breaker) transitionLocked(from, to State, now time.Time) {
	b.state = to
	switch {
	case to == StateOpen && !b.forced.Load():
		if from != StateHalfOpen {
			b.reopens, b.probeOK, b.turnLeft = 0, 0, 0 // a new outage
		}
		b.openedAt = now
		b.until = now.Add(b.interval())
		b.open.Store(&episode{until: b.until})
	case to == StateOpen:
		b.openedAt, b.until = now, time.Time{}
		b.open.Store(nil)
	default:
		if to == StateClosed {
			b.reopens = 0
			if from == StateHalfOpen && b.slowStart > 0 {
				b.rampFrom.Store(int64(now.Sub(b.epoch)) + 1)
			}
		}
		b.until = time.Time{}
		b.open.Store(nil)
	}
	if to != StateClosed {
		b.rampFrom.Store(0)
	}
	b.last = Transition{From: from, To: to, At: now}
	b.queue = append(b.queue, b.last)
	b.pending.Store(true)
}

// interval returns the probe interval after the failed probes so far. That is
// openTime, lengthened by the jitter, drawn anew. mu must be held.
func (b *Breaker) interval() time.Duration {
	d := b.openTime(b.reopens)
	return d + time.Duration(b.jitter*b.rand.Float64()*float64(d))
}

// openTime returns the open time after n failed probes in a row. That is
// OpenTimeout doubled n times, at most MaxOpenTimeout.
func (b *Breaker) openTime(n int) time.Duration {
	d := b.timeout
	for ; n > 0 && d < b.maxTimeout; n-- {
		if d > b.maxTimeout/2 {
			return b.maxTimeout // doubling would pass it (or overflow)
		}
		d *= 2
	}
	return min(d, b.maxTimeout)
}

// deliver hands queued transitions on, outside every lock. Each goes once to the
// observer of every pipeline the breaker is bound into, and once to OnStateChange.
// Transitions drained by different goroutines may be delivered concurrently.
func (b *Breaker) deliver() {
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	b.pending.Store(false)
	b.mu.Unlock()
	if len(q) == 0 {
		return
	}
	type sub struct {
		pipeline string
		obs      event.Observer
	}
	b.subsMu.Lock()
	subs := make([]sub, 0, len(b.subs))
	for o, name := range b.subs {
		subs = append(subs, sub{name, o})
	}
	b.subsMu.Unlock()
	for _, t := range q {
		for _, s := range subs {
			s.obs.Observe(event.Event{Kind: event.BreakerState, Pipeline: s.pipeline, Stage: Kind, Source: b.name,
				Time: t.At, From: t.From.String(), To: t.To.String()})
		}
		if b.onChange != nil {
			b.onChange(b.name, t.From, t.To)
		}
	}
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// Placement: a breaker stands on either side of the retry, and never waits.
func (b *Breaker) Placement() policy.Placement { return policy.Placement{Kind: Kind, Prompt: true} }

// Bind returns the Runner that runs each call through the breaker. It subscribes
// nothing. Every state change reaches the observers policy.Wrap subscribes
// ([Breaker.Subscribe]), each once. That holds for a change caused by any call,
// and by ForceOpen and Reset.
func (b *Breaker) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return &runner{b: b, next: next}
}

// Subscribe implements event.Source. Then o hears every state change of the
// breaker, as an event.BreakerState with Pipeline set to pipeline. It hears each
// once, however many pipelines that share the breaker subscribe it.
func (b *Breaker) Subscribe(o event.Observer, pipeline string) {
	if o == nil {
		return
	}
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	if b.subs == nil {
		b.subs = make(map[event.Observer]string)
	}
	b.subs[o] = pipeline
}

type runner struct {
	b    *Breaker
	next policy.Runner
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	b := r.b
	if b.forced.Load() {
		return b.forcedErr
	}
	if e := b.open.Load(); e != nil {
		if now := time.Now(); now.Before(e.until) {
			return b.refuse(e, now) // refused without a lock, until the next probe may go
		}
		return b.probe(ctx, r.next, fn)
	}
	if from := b.rampFrom.Load(); from != 0 && b.heldBack(from) {
		return b.rampErr
	}
	_, err := b.cb.Load().Execute(func() (struct{}, error) {
		var start time.Time
		if b.slow > 0 {
			start = time.Now()
		}
		err := r.next.Run(ctx, fn)
		if err == nil {
			if b.slow > 0 && time.Since(start) > b.slow {
				err = errSlow // a failure to the breaker; a success to the caller
			}
		} else if err == gobreaker.ErrOpenState || err == gobreaker.ErrTooManyRequests {
			// gobreaker's own sentinels from a breaker further down. Keep them apart
			// from this breaker's refusals.
			err = &passthrough{err}
		}
		return struct{}{}, err
	})
	if b.pending.Load() {
		b.deliver()
	}
	if err == nil {
		return nil
	}
	switch err {
	case gobreaker.ErrOpenState:
		return b.refusal()
	case errSlow:
		return nil
	}
	if p, ok := err.(*passthrough); ok {
		return p.err
	}
	return err
}

// neverHalfOpen is the open time gobreaker is given. The breaker probes by itself
// ([Breaker.probe]). The gobreaker circuit stays open until a probe's success
// replaces it with a fresh one.
const neverHalfOpen = 100 * 365 * 24 * time.Hour

// probe runs a call that found the breaker's open time up.
//
// HalfOpenProbes calls an interval go through as probes. The last of them starts
// the next interval at once. So a probe that hangs holds back nothing but itself:
// the next goes an interval later. A dependency that comes back is found by the
// first probe after its return. The outage's length does not matter.
//
// Outcomes are judged as gobreaker judges a call. HalfOpenProbes successes in a
// row close the breaker. A failure keeps it open until an interval after that
// probe went out. It costs nothing more. An excluded error decides nothing, and
// gives its turn to the next call.
func (b *Breaker) probe(ctx context.Context, next policy.Runner, fn policy.Func) error {
	now := time.Now()
	b.mu.Lock()
	e := b.open.Load()
	switch {
	case b.forced.Load():
		b.mu.Unlock()
		return b.forcedErr
	case e == nil: // closed meanwhile by another probe
		b.mu.Unlock()
		return (&runner{b: b, next: next}).Run(ctx, fn)
	case now.Before(e.until):
		b.mu.Unlock()
		return b.refuse(e, now)
	}
	if b.state != StateHalfOpen {
		b.transitionLocked(b.state, StateHalfOpen, now)
	}
	if b.turnLeft == 0 {
		b.turnLeft = b.settings.MaxRequests // a new interval
	}
	b.turnLeft--
	until := now // more probes may go in this interval
	if b.turnLeft == 0 {
		until = now.Add(b.interval())
	}
	b.open.Store(&episode{until: until, halfOpen: true})
	gen := b.gen
	b.mu.Unlock()
	b.deliver()

	err := next.Run(ctx, fn)
	judged := err
	if b.slow > 0 && err == nil && time.Since(now) > b.slow {
		judged = errSlow
	}
	excluded := b.settings.IsExcluded(judged)
	ok := !excluded && judged == nil
	if !excluded && b.settings.IsSuccessful != nil {
		ok = b.settings.IsSuccessful(judged)
	}

	end := time.Now()
	b.mu.Lock()
	if gen != b.gen || b.forced.Load() || b.open.Load() == nil {
		b.mu.Unlock()
		return err // reset, forced open or closed meanwhile: this outcome is stale
	}
	switch {
	case excluded:
		if b.turnLeft < b.settings.MaxRequests {
			b.turnLeft++
			b.open.Store(&episode{until: end, halfOpen: true})
		}
	case ok:
		if b.probeOK++; b.probeOK >= b.settings.MaxRequests {
			b.cb.Store(b.newCircuit())
			b.transitionLocked(b.state, StateClosed, end)
		}
	default:
		b.probeOK, b.turnLeft = 0, 0
		b.reopens++
		reopen := now.Add(b.interval())
		if cur := b.open.Load(); cur.until.After(reopen) {
			reopen = cur.until // a later probe has already set the next interval
		}
		if !reopen.After(end) {
			// The interval ran out while this probe hung: the next call probes.
			b.open.Store(&episode{until: end, halfOpen: true})
			break
		}
		if b.state != StateOpen {
			b.transitionLocked(b.state, StateOpen, end)
		}
		b.until = reopen
		b.open.Store(&episode{until: reopen})
	}
	b.mu.Unlock()
	if b.pending.Load() {
		b.deliver()
	}
	return err
}

// heldBack reports whether the slow start that began at from (see rampFrom) holds
// this call back. The slow start lets a share through that grows linearly from
// SlowStartMinShare to 1 over SlowStart. It ends itself once SlowStart has passed.
func (b *Breaker) heldBack(from int64) bool {
	elapsed := time.Since(b.epoch) - time.Duration(from-1)
	if elapsed >= b.slowStart {
		b.rampFrom.CompareAndSwap(from, 0)
		return false
	}
	share := SlowStartMinShare + (1-SlowStartMinShare)*float64(max(elapsed, 0))/float64(b.slowStart)
	return b.rand.Float64() >= share
}

// passthrough carries a gobreaker sentinel returned by the work through Execute.
type passthrough struct{ err error }

func (p *passthrough) Error() string { return p.err.Error() }

// refusal returns the error for a call gobreaker refused. That is the open
// episode's, or the forced one. If a probe has closed the breaker meanwhile, it is
// the half-open one.
func (b *Breaker) refusal() error {
	if b.forced.Load() {
		return b.forcedErr
	}
	if e := b.open.Load(); e != nil {
		return b.refuse(e, time.Now())
	}
	return b.halfOpenErr
}

// episode is a time the breaker refuses calls. It is open until its next probe may
// go, or half-open with its probes out. It is replaced, never changed, but for
// last.
type episode struct {
	until    time.Time // when the next probe may go
	halfOpen bool      // the probes are out: calls are refused with halfOpenErr
	// last is the latest refusal of an open episode. The calls refused within one
	// millisecond share it, so refusing seldom allocates.
	last atomic.Pointer[policy.RejectError]
}

// refuse returns the refusal of a call at now, during e. An open episode's
// refusal says the time left until its probe. It is rounded up to the
// millisecond. The refusals are shared by many calls: they are never modified.
func (b *Breaker) refuse(e *episode, now time.Time) *policy.RejectError {
	if e.halfOpen {
		return b.halfOpenErr
	}
	after := retryAfter(e.until, now)
	if r := e.last.Load(); r != nil && r.RetryAfter == after {
		return r
	}
	r := newRefusal(b.name, ReasonOpen, after)
	e.last.Store(r) // a racing refusal may store its twin: either will do
	return r
}

// newRefusal returns a breaker's refusal for reason, with retryAfter.
func newRefusal(name, reason string, retryAfter time.Duration) *policy.RejectError {
	return &policy.RejectError{Policy: Kind, Name: name, Reason: reason, RetryAfter: retryAfter, Err: ErrOpen}
}

// retryAfter returns the time from now until until, rounded up to the
// millisecond. It is 0 if until has passed.
func retryAfter(until, now time.Time) time.Duration {
	d := until.Sub(now)
	if d <= 0 {
		return 0
	}
	if r := d % time.Millisecond; r != 0 && d <= math.MaxInt64-time.Millisecond {
		d += time.Millisecond - r
	}
	return d
}

// State returns the breaker's state now. An open breaker whose timeout has passed
// is reported half-open, as gobreaker would. The transition itself happens, and
// is reported, on the next call.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stateLocked(time.Now())
}

func (b *Breaker) stateLocked(now time.Time) State {
	if b.forced.Load() {
		return StateOpen
	}
	if b.state == StateOpen && !now.Before(b.until) {
		return StateHalfOpen
	}
	return b.state
}

// Counts returns the counts of the current state.
func (b *Breaker) Counts() Counts { return Counts(b.cb.Load().Counts()) }

// OpenNow reports whether the breaker refuses calls now, and if so, for how much
// longer. That is the time until probes may go through. It is MaxOpenTimeout if
// the breaker was forced open. It takes no lock. It reads the clock only while the
// breaker has an open time. So a closed breaker answers in a few nanoseconds, and
// a server can ask it on every request. [Breaker.Snapshot] tells the rest.
func (b *Breaker) OpenNow() (time.Duration, bool) {
	if b.forced.Load() {
		return b.maxTimeout, true // held open by an operator: the longest it would stay open
	}
	e := b.open.Load()
	if e == nil {
		return 0, false // no open time: nothing to read the clock for
	}
	if now := time.Now(); now.Before(e.until) {
		return e.until.Sub(now), true
	}
	return 0, false
}

// StateValue returns the breaker's state now as the value of the
// backstop_breaker_state gauge: 0 closed, 1 half-open, 2 open.
func (b *Breaker) StateValue() float64 { return float64(b.State()) }

// ForceOpen makes the breaker refuse every call until [Breaker.Reset]. It is for
// operators: a dependency known to be down, maintenance. Forcing open a closed or
// half-open breaker is a transition to open like any other. It is reported to the
// observers and OnStateChange. It sets the time the breaker opened. Forcing open
// an open breaker changes no state: it keeps the time it tripped.
func (b *Breaker) ForceOpen() {
	now := time.Now()
	b.mu.Lock()
	if b.forced.Load() {
		b.mu.Unlock()
		return
	}
	from := b.stateLocked(now) // before forced is set, which makes it read open
	b.forced.Store(true)
	if from == StateOpen {
		// Open and refusing: no change of state, only of who holds it open. It
		// opened when it tripped. Nothing to report.
		b.until = time.Time{}
		b.open.Store(nil)
	} else {
		// Closed, or half-open: a transition to open, now. An open breaker whose
		// time is up is half-open, though gobreaker has not moved it yet.
		b.transitionLocked(from, StateOpen, now)
	}
	b.mu.Unlock()
	b.deliver()
}

// Reset closes the breaker with fresh counts, and lifts ForceOpen.
func (b *Breaker) Reset() {
	now := time.Now()
	b.mu.Lock()
	from := b.stateLocked(now)
	b.forced.Store(false)
	b.cb.Store(b.newCircuit())
	if from != StateClosed || b.state != StateClosed {
		b.transitionLocked(from, StateClosed, now)
	}
	b.mu.Unlock()
	b.deliver()
}

// ExplainStage implements policy.StageExplainer.
func (b *Breaker) ExplainStage() policy.Stage {
	open := b.timeout.String()
	if b.jitter > 0 {
		open = fmt.Sprintf("%v to %v", b.timeout, b.timeout+time.Duration(b.jitter*float64(b.timeout)))
	}
	every := "every " + open
	if b.maxTimeout > b.timeout {
		every += fmt.Sprintf(", doubling after each failed probe up to %v", b.maxTimeout)
	}
	slow := ""
	if b.slow > 0 {
		slow = fmt.Sprintf("; a success slower than %v counts as a failure", b.slow)
	}
	ramp, rampRefusal := "", ""
	if b.slowStart > 0 {
		rampRefusal = fmt.Sprintf("; just closed, it refuses the calls its slow start holds back (breaker.ErrOpen, reason slow_start, come back after %v)", b.slowStart/10)
		ramp = fmt.Sprintf("; once closed, lets %v%% of the calls through, rising to all over %v (slow start)", SlowStartMinShare*100, b.slowStart)
	}
	return policy.Stage{
		Summary: fmt.Sprintf("breaker %q %s (the caller's cancellation, refusals and client faults do not count%s); "+
			"stays open %s, then lets %s through %s until one succeeds%s", b.name, b.trip, slow, open, plural(int(b.settings.MaxRequests), "probe"), every, ramp),
		Refusal: fmt.Sprintf("breaker %q, open, ends the call before any attempt (breaker.ErrOpen, with the time it reopens)%s", b.name, rampRefusal),
	}
}

// plural returns "1 probe" or "n probes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
