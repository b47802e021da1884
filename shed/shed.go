package shed

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/jitter"
	"github.com/backstop-go/backstop/policy"
)

// Shedder admits work up to a concurrency limit and refuses the rest early and
// cheaply. See the package documentation for the model.
//
// A Shedder is safe for concurrent use. Build it with [New]; the zero value is not
// usable.
type Shedder struct {
	opts      Options
	name      string
	clock     clock.Clock
	epoch     time.Time // the clock's reading at New; a permit's start counts from it
	rand      jitter.Rand
	adaptive  *gradient // nil: fixed limit
	sheddable float64
	status    int
	bodies    [numReasons][]byte
	// Read by every refusal and seldom written: kept apart from the counters that
	// refusals write.
	subs atomic.Pointer[[]event.Observer] // Subscribe's, copied on write

	// Every admission and release writes slots: the work in flight and admitted, in
	// one word (see flight.go). A request moves one line between cores. The fields
	// limit and waiting are read by every request and seldom written. They have a line
	// of their own that stays in every core's cache. The padding keeps the groups 64
	// bytes apart, however the struct falls on cache lines.
	_          [64]byte
	slots      atomic.Uint64
	admittedAt atomic.Pointer[admittedBase] // an exact count of slots' admissions; seldom written
	_          [64]byte
	limit      atomic.Int64
	waiting    atomic.Int64 // queued requests, for Release's fast path
	_          [64]byte

	mu        sync.Mutex   // guards the queue and the fields below
	queues    [2][]*waiter // [0] default, [1] critical
	lastEmpty time.Time
	// intervalAuto: Queue.Interval was left to its default, which then grows with the
	// work's own baseline latency (queueInterval).
	intervalAuto bool

	pressure pressure
	quota    *quotas

	rejected [numReasons]atomic.Uint64
	// refusals[r][secs] is the error of a refusal for r with a Retry-After of secs.
	// Each is made on first use and then shared, so refusing allocates nothing.
	refusals [numReasons][]atomic.Pointer[policy.RejectError]

	subsMu sync.Mutex // guards writes of subs
}

// New returns a Shedder, or an error matching ErrInvalidOptions naming the bad field.
func New(o Options) (*Shedder, error) {
	s := &Shedder{opts: o, name: o.Name, clock: clock.Or(o.Clock), rand: jitter.Or(o.Rand)}
	s.epoch = s.clock.Now()
	if s.name == "" {
		s.name = "shed"
	}
	if noBreaker(o.Breaker) {
		s.opts.Breaker = nil
	}
	if err := s.limits(o); err != nil {
		return nil, err
	}
	if s.adaptive != nil {
		s.adaptive.systemRand = s.rand == jitter.System()
	}
	s.watchCPU()
	if err := s.queueOptions(o); err != nil {
		return nil, err
	}
	s.sheddable = orDefaultF(o.SheddableShare, DefaultSheddableShare)
	if !(s.sheddable > 0 && s.sheddable <= 1) {
		return nil, check.Err(ErrInvalidOptions, "SheddableShare is %v; want a number in (0, 1]", o.SheddableShare)
	}
	if err := s.refusalOptions(o); err != nil {
		return nil, err
	}
	if o.Quota != nil {
		q, err := newQuotas(*o.Quota)
		if err != nil {
			return nil, err
		}
		s.quota = q
	}
	for r := range numReasons {
		s.bodies[r] = problem(r, s.statusFor(Reason(r)))
	}
	s.lastEmpty = s.clock.Now()
	s.Subscribe(o.Observer, "")
	return s, nil
}

// watchCPU gives the CPU guard, if there is one, the counts it reads.
func (s *Shedder) watchCPU() {
	if s.adaptive == nil || s.adaptive.cpu == nil {
		return
	}
	s.adaptive.cpu.counts = func() (uint64, uint64, int64) {
		// Refusals of work that reached the limit or the guard. A client over its
		// quota, or work refused at an open breaker's gate, is no demand on this
		// server's CPUs.
		refused := s.refusedAtLimit() + s.rejected[ReasonCanceled].Load() + s.rejected[ReasonCPU].Load()
		return s.admittedNow(), refused, s.inFlight()
	}
	s.adaptive.cpu.baseline = s.adaptive.baseline
}

// Name returns the shedder's name.
func (s *Shedder) Name() string { return s.name }

// Limit returns the current concurrency limit.
func (s *Shedder) Limit() int { return int(s.limit.Load()) }

// InFlight returns the work admitted and not yet released.
func (s *Shedder) InFlight() int { return int(s.inFlight()) }

// QueueLen returns the requests waiting for a slot.
func (s *Shedder) QueueLen() int { return int(s.waiting.Load()) }

// Admitted returns how much work the shedder has admitted since it was built.
func (s *Shedder) Admitted() uint64 { return s.admittedNow() }

// Stats are a shedder's counters since it was built.
type Stats struct {
	Admitted uint64
	Rejected map[Reason]uint64 // by reason; reasons never seen are absent
	InFlight int
	Limit    int
	Queued   int
}

// Stats returns the shedder's counters now.
func (s *Shedder) Stats() Stats {
	st := Stats{Admitted: s.admittedNow(), Rejected: map[Reason]uint64{},
		InFlight: s.InFlight(), Limit: s.Limit(), Queued: s.QueueLen()}
	for r := range numReasons {
		if n := s.rejected[r].Load(); n > 0 {
			st.Rejected[Reason(r)] = n
		}
	}
	return st
}
