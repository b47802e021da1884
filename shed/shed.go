package shed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/policy"
)

// Defaults of admission, queueing and Retry-After, for zero Options fields.
const (
	DefaultMaxQueue      = 64
	DefaultQueueTarget   = 5 * time.Millisecond
	DefaultQueueInterval = 100 * time.Millisecond
	// DefaultSheddableShare is the share of the limit sheddable work may fill.
	DefaultSheddableShare = 0.75
	// DefaultMaxRetryAfter caps the Retry-After the shedder sends, jitter included.
	DefaultMaxRetryAfter = 30 * time.Second
)

var (
	// ErrShed is matched by the error of work the Shedder refused as a policy. That
	// error is a *policy.RejectError, so it matches policy.ErrRejected too.
	ErrShed = errors.New("shed: rejected")
	// ErrInvalidOptions is matched by New's errors for bad Options.
	ErrInvalidOptions = errors.New("shed: invalid options")
)

// Quota limits each client to a rate of requests, on golang.org/x/time/rate.
//
// Keys are bounded: a key longer than MaxQuotaKey bytes is replaced by a hash of it
// ("sha256:" and 16 bytes of it in hex, 39 bytes), so a client sending long keys cannot
// make the buckets hold its keys' bytes — in this process or in a Store.
type Quota struct {
	// Key names the client of a request (an API key, a tenant, the remote address).
	// Required. A request it names no client for ("") is handled as NoKey says.
	Key func(*http.Request) string
	// NoKey says what becomes of requests without a key; the zero value, NoKeyShare,
	// puts them all in one bucket of Rate and Burst, so a missing header is never a
	// way around the quota.
	NoKey NoKey
	// Rate and Burst are each client's token bucket. Rate must be > 0, Burst ≥ 1.
	Rate  rate.Limit
	Burst int
	// MaxClients bounds the clients tracked at once; 0 means 10 000. When full, idle
	// clients (whose bucket has refilled) are forgotten first. It bounds this
	// process's buckets, not a Store's.
	MaxClients int
	// Store, if non-nil, keeps the clients' buckets outside this process, so that a
	// fleet of servers shares one quota per client (the fleet module keeps them in
	// Redis): Rate and Burst are then each client's limit across the fleet. nil means
	// the buckets of this process.
	Store QuotaStore
}

// NoKey is what a [Quota] does with requests its Key names no client for.
type NoKey uint8

// What becomes of requests without a key.
const (
	// NoKeyShare puts every request without a key in one shared bucket of the
	// Quota's Rate and Burst. The default.
	NoKeyShare NoKey = iota
	// NoKeyRefuse refuses every request without a key (429, ReasonQuota).
	NoKeyRefuse
	// NoKeyExempt lets requests without a key through unlimited: for keys that
	// only some trusted requests lack (a health check from the load balancer).
	NoKeyExempt
)

// QuotaStore keeps per-client token buckets outside the process, for [Quota].Store.
//
// Allow takes one token from key's bucket of rate r and burst burst, or reports how
// long until one is there. It is asked once per request that names a client, so it
// must answer within a small bound of its own and, when its store cannot answer in
// time, answer from a bucket of its own (fail open): a quota store that is down must
// not take the server down with it. It must be safe for concurrent use.
type QuotaStore interface {
	Allow(ctx context.Context, key string, r rate.Limit, burst int) (wait time.Duration, ok bool)
}

// Options configure a [Shedder]. The zero value is valid: an adaptive limit starting
// at 1000 in flight, within [1, 1000], a CPU guard at 5 ms, a queue of 64, status 429.
type Options struct {
	// Name labels the shedder's events and metrics; "" means "shed".
	Name string

	// Limit is the concurrency limit: adaptive (the zero value) or fixed.
	Limit LimitOptions
	// Queue is where requests wait for a slot.
	Queue QueueOptions
	// SheddableShare is the share of the limit sheddable work may fill, in (0, 1]; 0
	// means DefaultSheddableShare (0.75).
	SheddableShare float64

	// Priority gives a request's priority; nil means PriorityDefault for all. A retry
	// (attempt header above 1) is sheddable whatever this says.
	Priority func(*http.Request) Priority
	// Quota, if non-nil, limits each client's rate.
	Quota *Quota
	// Breaker, if non-nil, guards the handler's dependency: while it is open the
	// middleware answers 503 with the breaker's remaining open time as Retry-After.
	Breaker *breaker.Breaker

	// Refusal is what a refused request is told.
	Refusal RefusalOptions

	// Observer receives an event.Shed for every rejection by [Middleware] and by
	// [Shedder.Admit]. Calls through a pipeline report to the pipeline's Observer
	// instead (to this one only if the pipeline has none), so every refusal is
	// reported exactly once. Observers added with [Shedder.AddObserver] hear every
	// refusal, however made.
	Observer event.Observer
	// Clock and Rand are seams for tests; nil means clock.System() and
	// jitter.System().
	Clock clock.Clock
	Rand  jitter.Rand
}

// LimitOptions configure the concurrency limit. The zero value is the adaptive limit
// with its defaults.
type LimitOptions struct {
	// Fixed, if > 0, fixes the limit and turns the adaptive limit off; the other
	// fields must then be zero.
	Fixed int
	// Initial, Min and Max bound the adaptive limit; 0 means the Max (DefaultInitialLimit),
	// DefaultMinLimit (1), DefaultMaxLimit (1000).
	Initial, Min, Max int
	// Smoothing is how far the limit moves towards its target in a window whose
	// latency is above Tolerance, in (0, 1]; 0 means DefaultSmoothing (0.7).
	Smoothing float64
	// Tolerance is how much latency may rise over the baseline before the limit
	// shrinks, ≥ 1; 0 means DefaultTolerance (1.5).
	Tolerance float64
	// Headroom is what a window adds to the limit, at least, when the limit was full
	// and latency at the baseline (it grows to what the load needs by Little's law, at
	// most doubling; less as latency nears Tolerance); 0 means DefaultHeadroom (4).
	Headroom float64
	// Window is the sampling window of the adaptive limit; a window closes when it is
	// this old and holds MinSamples latencies. 0 means DefaultWindow (100 ms) and
	// DefaultMinSamples (10).
	Window     time.Duration
	MinSamples int
	// LatencySamples is how many latencies a window of the adaptive limit aims to
	// hold; 0 means DefaultLatencySamples (256). When a window admits more requests,
	// the next one times one request in k at random, k = the requests a window admits
	// at the rate of the one before ÷ LatencySamples, so a busy server does not read
	// the clock twice per request.
	LatencySamples int
	// SchedLatency also watches this process's CPUs: while more than 16 goroutines
	// a CPU are runnable and the 90th percentile of their waits for one is over
	// SchedLatency, requests are queueing where no concurrency limit sees them, as
	// on a CPU-bound server whose handlers run to completion one after another. The
	// shedder then refuses the share of new work its CPUs cannot serve (ReasonCPU;
	// critical work never, sheddable work first); see the package doc's CPU section.
	// Waits caused by other processes do not lengthen this process's queue and are
	// not acted on. 0 means DefaultSchedLatency (20 ms). SchedLatencyOff (any
	// negative value) turns the guard off: do so where the process runs CPU-heavy
	// batch work beside its server, whose goroutines queue for the CPU without the
	// server being overloaded.
	SchedLatency time.Duration
}

// QueueOptions configure the queue of requests waiting for a slot. The zero value is
// a queue of DefaultMaxQueue (64) timed CoDel-style at 5 ms and 100 ms.
type QueueOptions struct {
	// Max is how many requests may wait for a slot; 0 means DefaultMaxQueue (64),
	// negative means no queue.
	Max int
	// Target and Interval time the queue CoDel-style: a request waits at most
	// Interval, or only Target while a standing queue exists (the queue has not been
	// empty for Interval), and then the newest is served first. 0 means
	// DefaultQueueTarget (5 ms) and DefaultQueueInterval (100 ms); with the adaptive
	// limit, a default Interval grows to 20 baseline latencies of the work, at most
	// 500 ms (500 ms for 25 ms database queries, 100 ms for work under 5 ms): a queue is
	// judged in the time of the work it holds, and a server near its capacity keeps
	// its answers.
	Target, Interval time.Duration
}

// RefusalOptions configure what a refused request is told. The zero value answers
// 429 with a Retry-After of at most DefaultMaxRetryAfter (30 s).
type RefusalOptions struct {
	// Status is the status of a refusal for want of a slot: 429 (the zero value) or
	// 503.
	Status int
	// MaxRetryAfter caps the Retry-After of refusals for want of a slot, jitter
	// included; 0 means DefaultMaxRetryAfter (30 s). The value follows the share of
	// requests refused (see [Shedder.RetryAfter]) and is sent with up to +50 % upward
	// jitter in whole seconds. An open breaker's refusals say the breaker's own open
	// time, a quota's the client's next token.
	MaxRetryAfter time.Duration
}

// Shedder admits work up to a concurrency limit and refuses the rest early and
// cheaply. See the package documentation for the model.
//
// A Shedder is safe for concurrent use. Build it with [New]; the zero value is not
// usable.
type Shedder struct {
	opts      Options
	name      string
	clock     clock.Clock
	rand      jitter.Rand
	adaptive  *gradient // nil: fixed limit
	sheddable float64
	status    int
	bodies    [numReasons][]byte
	// Read by every refusal and seldom written: kept apart from the counters that
	// refusals write.
	own  audience                         // Options.Observer
	subs atomic.Pointer[[]event.Observer] // AddObserver's, copied on write

	// Every admission and release writes inflight and admitted: they share one cache
	// line, so a request moves one line between cores, not two. limit and waiting,
	// read by every request and seldom written, have a line of their own that stays
	// in every core's cache: the padding keeps the groups 64 bytes apart however the
	// struct falls on cache lines.
	_        [64]byte
	inflight atomic.Int64
	admitted atomic.Uint64
	_        [64]byte
	limit    atomic.Int64
	waiting  atomic.Int64 // queued requests, for Release's fast path
	_        [64]byte

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

// audience is an observer a refusal is reported to and the observers it combines
// (event.Members), so that an observer added with AddObserver that is also among them
// hears the refusal once.
type audience struct {
	obs     event.Observer
	members []event.Observer
}

func audienceOf(o event.Observer) audience { return audience{o, event.Members(o)} }

// AddObserver makes o hear every refusal of the shedder from now on, as an
// event.Shed: the middleware's, Admit's and those of every pipeline the shedder is a
// stage of, whatever observer those report to. An o added twice, or also among the
// observers a refusal is reported to, hears it once; o should be a pointer (other
// values are kept in a box of their own each time). A nil o is ignored. This is how
// metrics.Observer.AddShedder counts the refusals of a shedder it exports.
func (s *Shedder) AddObserver(o event.Observer) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	var list []event.Observer
	if cur := s.subs.Load(); cur != nil {
		list = append(list, *cur...)
	}
	for _, m := range event.Members(o) {
		if reflect.TypeOf(m).Kind() != reflect.Pointer {
			m = &boxed{m}
		}
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	s.subs.Store(&list)
}

type boxed struct{ event.Observer }

// New returns a Shedder, or an error matching ErrInvalidOptions naming the bad field.
func New(o Options) (*Shedder, error) {
	bad := check.Invalid[*Shedder](ErrInvalidOptions)
	s := &Shedder{opts: o, name: o.Name, clock: clock.Or(o.Clock), rand: jitter.Or(o.Rand), own: audienceOf(o.Observer)}
	if s.name == "" {
		s.name = "shed"
	}
	if err := s.limits(o); err != nil {
		return nil, err
	}
	if s.adaptive != nil && s.adaptive.cpu != nil {
		s.adaptive.cpu.counts = func() (uint64, uint64, int64) {
			// Refusals of work that reached the limit or the guard: a client over its
			// quota, or work refused at an open breaker's gate, is no demand on this
			// server's CPUs.
			refused := s.refusedAtLimit() + s.rejected[ReasonCanceled].Load() + s.rejected[ReasonCPU].Load()
			return s.admitted.Load(), refused, s.inflight.Load()
		}
		s.adaptive.cpu.baseline = s.adaptive.baseline
	}
	if o.Queue.Max == 0 {
		s.opts.Queue.Max = DefaultMaxQueue
	}
	switch {
	case o.Queue.Target < 0:
		return bad("Queue.Target is %v; want > 0, or 0 for the default %v", o.Queue.Target, DefaultQueueTarget)
	case o.Queue.Interval < 0:
		return bad("Queue.Interval is %v; want > 0, or 0 for the default %v", o.Queue.Interval, DefaultQueueInterval)
	case o.Queue.Target > 0 && o.Queue.Interval > 0 && o.Queue.Target > o.Queue.Interval:
		return bad("Queue.Target is %v, above Queue.Interval %v; want Queue.Target ≤ Queue.Interval", o.Queue.Target, o.Queue.Interval)
	}
	// A default gives way to the value the user set: the interval is at least the
	// target, the target at most the interval.
	s.intervalAuto = o.Queue.Interval == 0
	s.opts.Queue.Target = orDefaultD(o.Queue.Target, min(DefaultQueueTarget, orDefaultD(o.Queue.Interval, DefaultQueueTarget)))
	s.opts.Queue.Interval = orDefaultD(o.Queue.Interval, max(DefaultQueueInterval, s.opts.Queue.Target))
	s.sheddable = orDefaultF(o.SheddableShare, DefaultSheddableShare)
	if !(s.sheddable > 0 && s.sheddable <= 1) {
		return bad("SheddableShare is %v; want a number in (0, 1]", o.SheddableShare)
	}
	switch o.Refusal.Status {
	case 0:
		s.status = http.StatusTooManyRequests
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		s.status = o.Refusal.Status
	default:
		return bad("Refusal.Status is %d; want 429 or 503", o.Refusal.Status)
	}
	maxRA := orDefaultD(o.Refusal.MaxRetryAfter, DefaultMaxRetryAfter)
	if maxRA < time.Second {
		return bad("Refusal.MaxRetryAfter is %v; want ≥ 1s, or 0 for the default %v", o.Refusal.MaxRetryAfter, DefaultMaxRetryAfter)
	}
	s.pressure = pressure{max: int64(maxRA / time.Second), base: 1}
	cached := min(int(s.pressure.max), len(retryAfterValues)-1) + 1
	for r := range s.refusals {
		s.refusals[r] = make([]atomic.Pointer[policy.RejectError], cached)
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
	return s, nil
}

// adaptiveFields names the Options fields of the adaptive limit that are set.
func adaptiveFields(o Options) []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Limit.Initial", o.Limit.Initial != 0}, {"Limit.Min", o.Limit.Min != 0}, {"Limit.Max", o.Limit.Max != 0},
		{"Limit.Smoothing", o.Limit.Smoothing != 0}, {"Limit.Tolerance", o.Limit.Tolerance != 0}, {"Limit.Headroom", o.Limit.Headroom != 0},
		{"Limit.Window", o.Limit.Window != 0}, {"Limit.MinSamples", o.Limit.MinSamples != 0},
		{"Limit.LatencySamples", o.Limit.LatencySamples != 0}, {"Limit.SchedLatency", o.Limit.SchedLatency > 0},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

// limits sets up the fixed or adaptive limit from o. Defaults are clamped into the
// range the user set (MaxLimit 10 alone lowers the initial limit to 10); values the
// user set that contradict each other are refused, naming them.
func (s *Shedder) limits(o Options) error {
	bad := func(format string, args ...any) error { return check.Err(ErrInvalidOptions, format, args...) }
	if o.Limit.Fixed < 0 {
		return bad("Limit.Fixed is %d; want ≥ 1, or 0 for an adaptive limit", o.Limit.Fixed)
	}
	if o.Limit.Fixed > 0 {
		if set := adaptiveFields(o); len(set) > 0 {
			return bad("Limit.Fixed is %d (a fixed limit) and %s is set, which applies to the adaptive limit only; set one or the other",
				o.Limit.Fixed, strings.Join(set, ", "))
		}
		s.limit.Store(int64(o.Limit.Fixed))
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Limit.Initial", o.Limit.Initial}, {"Limit.Min", o.Limit.Min}, {"Limit.Max", o.Limit.Max}, {"Limit.MinSamples", o.Limit.MinSamples},
		{"Limit.LatencySamples", o.Limit.LatencySamples}} {
		if f.v < 0 {
			return bad("%s is %d; want ≥ 1, or 0 for the default", f.name, f.v)
		}
	}
	lo, hi, initial := o.Limit.Min, o.Limit.Max, o.Limit.Initial
	if lo > 0 && hi > 0 && lo > hi {
		return bad("Limit.Min is %d, above Limit.Max %d; want Limit.Min ≤ Limit.Max", lo, hi)
	}
	if initial > 0 && (lo > 0 && initial < lo || hi > 0 && initial > hi) {
		return bad("Limit.Initial is %d, outside [Limit.Min %d, Limit.Max %d]; want it within", initial, lo, hi)
	}
	// Each default gives way to every value the user set.
	if lo == 0 {
		lo = min(DefaultMinLimit, orDefault(hi, DefaultMinLimit), orDefault(initial, DefaultMinLimit))
	}
	if hi == 0 {
		hi = max(DefaultMaxLimit, lo, initial)
	}
	if initial == 0 {
		initial = min(max(DefaultInitialLimit, lo), hi)
	}
	g := &gradient{
		min: float64(lo), max: float64(hi),
		smoothing: orDefaultF(o.Limit.Smoothing, DefaultSmoothing), tol: orDefaultF(o.Limit.Tolerance, DefaultTolerance),
		headroom: orDefaultF(o.Limit.Headroom, DefaultHeadroom), window: orDefaultD(o.Limit.Window, DefaultWindow),
		minSamples: orDefault(o.Limit.MinSamples, DefaultMinSamples),
		samples:    int64(orDefault(o.Limit.LatencySamples, DefaultLatencySamples)),
		probeAfter: probeAfter,
	}
	g.stride.Store(1)
	switch {
	case !(g.smoothing > 0 && g.smoothing <= 1):
		return bad("Limit.Smoothing is %v; want a number in (0, 1]", o.Limit.Smoothing)
	case !(g.tol >= 1) || math.IsInf(g.tol, 0):
		return bad("Limit.Tolerance is %v; want ≥ 1", o.Limit.Tolerance)
	case !(g.headroom >= 0) || math.IsInf(g.headroom, 0):
		return bad("Limit.Headroom is %v; want ≥ 0", o.Limit.Headroom)
	case g.window < 0:
		return bad("Limit.Window is %v; want > 0, or 0 for the default %v", o.Limit.Window, DefaultWindow)
	case o.Limit.SchedLatency >= 0:
		g.cpu = &cpuGuard{target: orDefaultD(o.Limit.SchedLatency, DefaultSchedLatency), read: newSchedReader().read, queue: runnableQueue}
	}
	g.limit = float64(initial)
	s.adaptive = g
	s.limit.Store(int64(initial))
	return nil
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func orDefaultF(v, d float64) float64 {
	if v == 0 {
		return d
	}
	return v
}

func orDefaultD(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

// Name returns the shedder's name.
func (s *Shedder) Name() string { return s.name }

// Limit returns the current concurrency limit.
func (s *Shedder) Limit() int { return int(s.limit.Load()) }

// InFlight returns the work admitted and not yet released.
func (s *Shedder) InFlight() int { return int(s.inflight.Load()) }

// QueueLen returns the requests waiting for a slot.
func (s *Shedder) QueueLen() int { return int(s.waiting.Load()) }

// Admitted returns how much work the shedder has admitted since it was built.
func (s *Shedder) Admitted() uint64 { return s.admitted.Load() }

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
	st := Stats{Admitted: s.admitted.Load(), Rejected: map[Reason]uint64{},
		InFlight: s.InFlight(), Limit: s.Limit(), Queued: s.QueueLen()}
	for r := range numReasons {
		if n := s.rejected[r].Load(); n > 0 {
			st.Rejected[Reason(r)] = n
		}
	}
	return st
}

// Permit is admitted work. Call Release exactly once when the work is done.
type Permit struct {
	s     *Shedder
	start time.Time
	timed bool  // the adaptive limit takes this request's latency
	hold  *hold // its Pauser, once asked for
}

// Admit asks for a slot for work of priority p. It returns a Permit and ReasonNone,
// or a zero Permit and why the work was refused. Work that cannot be admitted at once
// may wait in the queue (never sheddable work, never past ctx's deadline).
func (s *Shedder) Admit(ctx context.Context, p Priority) (Permit, Reason) {
	permit, why, ra := s.tryAdmit(ctx, p)
	if why != ReasonNone {
		s.report(ctx, s.own, "", why, p, ra.secs)
	}
	return permit, why
}

// tryAdmit is Admit that also returns, for a refusal, when it asks the request back.
func (s *Shedder) tryAdmit(ctx context.Context, p Priority) (Permit, Reason, refusal) {
	if g := s.adaptive; g != nil && g.cpu != nil && g.cpu.share.Load() != 0 && g.cpu.refuses(p, s.rand.Float64()) {
		now := s.clock.Now()
		g.refreshCPU(now)
		return s.refuseAt(now, ReasonCPU, p)
	}
	limit := s.limit.Load()
	room := limit // how many in flight this priority may join
	if p < 0 {
		// At least one: an idle server admits a retry; shedding retries first is for
		// when there is pressure.
		room = max(1, int64(float64(limit)*s.sheddable))
	}
	if s.waiting.Load() > 0 {
		// Requests wait for slots: a newcomer must not take a slot freed for them.
		if p < 0 {
			return s.refuse(ReasonPriority, p)
		}
		if s.adaptive != nil {
			s.adaptive.full.Add(1)
		}
		if s.opts.Queue.Max < 0 {
			return s.refuse(ReasonLimit, p)
		}
		return s.wait(ctx, p)
	}
	for {
		n := s.inflight.Load()
		if n >= room {
			break
		}
		if s.inflight.CompareAndSwap(n, n+1) {
			return s.admit(n + 1), ReasonNone, refusal{}
		}
	}
	if s.adaptive != nil {
		s.adaptive.full.Add(1) // the limit bound this request: evidence for growing it
	}
	if p < 0 {
		return s.refuse(ReasonPriority, p)
	}
	if s.opts.Queue.Max < 0 {
		return s.refuse(ReasonLimit, p)
	}
	return s.wait(ctx, p)
}

// refusal is when a refused request is told to come back: Retry-After in whole
// seconds (secs, jittered) and the pressure's base it was drawn from, which
// [Shedder.briefMillis] scales too, so that the two headers of one refusal say the
// same thing.
type refusal struct {
	secs int
	base int64
}

// refuse is reject with the pressure-adapted Retry-After.
func (s *Shedder) refuse(r Reason, p Priority) (Permit, Reason, refusal) {
	return s.refuseAt(s.clock.Now(), r, p)
}

// refuseAt is refuse at now: the refusal is counted in the pressure, and its
// Retry-After drawn from the base that results, in one reading.
func (s *Shedder) refuseAt(now time.Time, r Reason, p Priority) (Permit, Reason, refusal) {
	base := s.pressure.reject(now, s.admitted.Load())
	return Permit{}, s.reject(r), refusal{secs: s.draw(base), base: base}
}

func (s *Shedder) admit(inflight int64) Permit {
	s.admitted.Add(1)
	p := Permit{s: s}
	if s.adaptive != nil && s.adaptive.admitted(inflight, s.rand) { // only the adaptive limit needs latencies
		p.start, p.timed = s.clock.Now(), true
	}
	return p
}

// Release returns the permit's slot of work that succeeded and, for an adaptive
// limit, records its latency. Releasing a zero Permit does nothing.
func (p Permit) Release() { p.release(true) }

// ReleaseFailed returns the permit's slot of work that failed. Its latency is not
// recorded: a fast failure (a handler whose own dependency is down) says nothing about
// this server's load, and learning from it would make every success afterwards look
// slow. Releasing a zero Permit does nothing.
func (p Permit) ReleaseFailed() { p.release(false) }

func (p Permit) release(ok bool) {
	s := p.s
	if s == nil {
		return
	}
	if p.timed && ok {
		now := s.clock.Now()
		if l, changed := s.adaptive.sample(now, now.Sub(p.start), s.admitted.Load(), s.refusedAtLimit(), s.inflight.Load()-1); changed {
			s.limit.Store(l)
		}
	}
	if s.waiting.Load() > 0 {
		// Free the slot and hand it on under the lock: newcomers see requests waiting
		// and queue behind them rather than take it (see tryAdmit).
		s.mu.Lock()
		s.inflight.Add(-1)
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
		return
	}
	s.inflight.Add(-1)
	if s.waiting.Load() > 0 { // a request queued just now, after looking at a full limit
		s.mu.Lock()
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
	}
}

// pause gives a slot back for admitted work that waits; a request waiting in the
// queue may take it. resume takes it again.
func (s *Shedder) pause() {
	s.inflight.Add(-1)
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
	}
}

func (s *Shedder) resume() { s.inflight.Add(1) }

// hold is one admitted request's hold on its slot, as the callpath.Pauser of its
// context. Pauses nest — the first gives the slot back, the last Resume takes it
// again — so a request paused twice at once (its body read by a proxied call, calls
// made in parallel) gives back one slot.
type hold struct {
	s     *Shedder
	depth atomic.Int32
}

func (h *hold) Pause() {
	if h.depth.Add(1) == 1 {
		h.s.pause()
	}
}

func (h *hold) Resume() {
	if h.depth.Add(-1) == 0 {
		h.s.resume()
	}
}

// Pauser returns the callpath.Pauser of the permit's work: put it in the work's context
// (callpath.WithPauser) and the work gives its slot back while it waits — a retry's
// backoff, a call through policyhttp's transport — and takes it again after, whatever
// the limit (the work was admitted). Pauses nest. Work that paused is timed in full:
// its latency, waits included, is what its callers see, and the latency a breaker's
// refusal adds to its Retry-After. The zero Permit's Pauser does nothing.
func (p *Permit) Pauser() callpath.Pauser {
	if p.s == nil {
		return nopPauser{}
	}
	if p.hold == nil {
		p.hold = &hold{s: p.s}
	}
	return p.hold
}

type nopPauser struct{}

func (nopPauser) Pause()  {}
func (nopPauser) Resume() {}

// refusedAtLimit counts the refusals of work that found no slot.
func (s *Shedder) refusedAtLimit() uint64 {
	return s.rejected[ReasonLimit].Load() + s.rejected[ReasonPriority].Load() + s.rejected[ReasonQueueFull].Load() +
		s.rejected[ReasonQueue].Load() + s.rejected[ReasonDeadline].Load()
}

// reject counts a refusal answered with a Retry-After of ra seconds.
func (s *Shedder) reject(r Reason) Reason {
	s.rejected[r].Add(1)
	return r
}

// report sends the event.Shed of a refusal to to.obs — the pipeline's Observer for a
// call through a pipeline, Options.Observer for a request through the middleware —
// and to each observer added with AddObserver that is not among to's members.
func (s *Shedder) report(ctx context.Context, to audience, pipeline string, r Reason, p Priority, ra int) {
	subs := s.subs.Load()
	if to.obs == nil && subs == nil {
		return
	}
	e := event.Event{Kind: event.Shed, Stage: Kind, Pipeline: pipeline, Source: s.name, Time: s.clock.Now(),
		Reason: r.String(), Priority: p.String(), Delay: time.Duration(ra) * time.Second, Level: float64(s.limit.Load()), Context: ctx}
	if to.obs != nil {
		to.obs.Observe(e)
	}
	if subs != nil {
		for _, o := range *subs {
			if !slices.Contains(to.members, o) {
				o.Observe(e)
			}
		}
	}
}

// RetryAfter returns the Retry-After to send with a rejection now, in whole seconds:
// the shedder's estimate of when a client refused now will be admitted, with upward
// jitter. The estimate comes from the share ρ of requests refused over the last second
// (admitted requests and refusals for want of a slot; an open breaker's refusals carry
// the breaker's own open time instead, and a quota's the client's next token): a client
// that comes back every T is admitted with probability 1 − ρ each time, so it waits
// T / (1 − ρ) on average; the base is that for T = 1 s, rounded to whole seconds — 1 s
// while under a third of the requests are refused, 2 s at half, 10 s at 90 % — and it falls back
// to 1 s after a second without refusals. The value sent is drawn uniformly from
// [base, base + ⌈base/2⌉] and never exceeds Refusal.MaxRetryAfter: at base 1 s half the
// clients are told 1 and half 2; at 16 s the values 16…24 are equally likely. Whole
// seconds are what RFC 9110's delay-seconds can say; clients that arrive over time
// then return spread over the whole range.
func (s *Shedder) RetryAfter() time.Duration {
	return time.Duration(s.draw(s.pressure.current(s.clock.Now(), s.admitted.Load()))) * time.Second
}

// draw returns a Retry-After in whole seconds, as the header sends it, for the
// pressure's base: jittered, never above MaxRetryAfter.
func (s *Shedder) draw(base int64) int {
	return min(jitterSeconds(base, s.rand.Float64()), int(s.pressure.max))
}

// jitterSeconds draws a whole number of seconds uniformly from [base, base+⌈base/2⌉]
// with r in [0, 1).
func jitterSeconds(base int64, r float64) int {
	span := (base + 1) / 2 // ⌈base/2⌉
	extra := int64(r * float64(span+1))
	return int(base + min(extra, span))
}

// pressurePrior is how many admitted requests the refused share assumes besides
// those counted: 1 refusal alone reads as 9 %, 10 of 10 as half, 1 000 of 1 000 as 99 %.
const pressurePrior = 10

// pressure estimates the Retry-After base from the share of requests refused.
type pressure struct {
	max int64 // MaxRetryAfter, whole seconds

	mu       sync.Mutex // guards the fields below
	base     int64      // seconds, ≥ 1 (1 from New; rollLocked keeps it so)
	since    time.Time  // start of the span being counted; zero: none
	admitted uint64     // the shedder's admitted count at since
	refused  uint64     // refusals since
}

// reject notes a refusal at now and returns the base in force; admitted is the
// shedder's admitted count.
func (p *pressure) reject(now time.Time, admitted uint64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rollLocked(now, admitted)
	p.refused++
	return p.base
}

// rollLocked closes the span being counted once it is a second old, setting the base
// from its refused share; a span with no refusals starts nothing. mu must be held.
func (p *pressure) rollLocked(now time.Time, admitted uint64) {
	if p.since.IsZero() {
		p.since, p.admitted, p.refused = now, admitted, 0
		return
	}
	age := now.Sub(p.since)
	if age < time.Second {
		return
	}
	if age >= 2*time.Second || p.refused == 0 {
		p.base = 1 // a calm second (or more) since the refusals counted
	} else {
		// A handful of requests says little: a lone client refused once must not
		// read as all of the traffic refused. The share counts pressurePrior requests
		// admitted besides those seen, which a busy second's hundreds outweigh.
		share := float64(p.refused) / (float64(p.refused+since(admitted, p.admitted)) + pressurePrior)
		p.base = baseFor(share, p.max)
	}
	p.since, p.admitted, p.refused = now, admitted, 0
}

// baseFor returns 1 / (1 − share) seconds, rounded, at most the largest base whose jitter
// stays within ceiling: b + ⌈b/2⌉ ≤ ceiling.
func baseFor(share float64, ceiling int64) int64 {
	top := max(1, (2*ceiling)/3)
	for top > 1 && top+(top+1)/2 > ceiling {
		top--
	}
	if share >= 1 {
		return top
	}
	return min(top, max(1, int64(math.Round(1/(1-share)))))
}

func (p *pressure) current(now time.Time, admitted uint64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rollLocked(now, admitted)
	return p.base
}

// Placement: a shedder is outermost, once, in a pipeline with no retry.
func (s *Shedder) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Outermost: true, Once: true}
}

// Bind returns the Runner that admits each call, with the priority set by
// WithPriority (lowered for an upstream retry), and refuses the rest with a
// *policy.RejectError. Refusals are reported to env.Observer, or to Options.Observer
// if the pipeline has none: each refusal is reported once.
func (s *Shedder) Bind(next policy.Runner, env policy.Env) policy.Runner {
	to := s.own
	if env.Observer != nil {
		to = audienceOf(env.Observer)
	}
	return &runner{s: s, next: next, to: to, pipeline: env.Pipeline}
}

type runner struct {
	s        *Shedder
	next     policy.Runner
	to       audience
	pipeline string
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	p := priorityOf(ctx)
	permit, why, ra := r.s.tryAdmit(ctx, p)
	if why != ReasonNone {
		r.s.report(ctx, r.to, r.pipeline, why, p, ra.secs)
		if why == ReasonCanceled {
			return fmt.Errorf("shed: %w", ctx.Err())
		}
		return r.s.refusal(why, ra.secs)
	}
	if 2*r.s.inflight.Load() >= r.s.limit.Load() {
		// Half the limit in use: a retry's backoff in fn gives the slot back (a new
		// context per call costs nothing a server with room needs to pay).
		ctx = callpath.WithPauser(ctx, permit.Pauser())
	}
	err := r.next.Run(ctx, fn)
	permit.release(err == nil)
	return err
}

// refusal returns the error of work refused for r with a Retry-After of secs. Its
// RetryAfter is what the middleware would have sent (see [Shedder.RetryAfter]). The
// error is shared: for the usual Retry-Afters it is made once.
func (s *Shedder) refusal(r Reason, secs int) *policy.RejectError {
	cache := s.refusals[r]
	if secs < len(cache) {
		if e := cache[secs].Load(); e != nil {
			return e
		}
	}
	e := &policy.RejectError{Policy: Kind, Name: s.name, Reason: r.String(),
		RetryAfter: time.Duration(secs) * time.Second, Err: ErrShed}
	if secs < len(cache) {
		cache[secs].Store(e) // a racing refusal may store its twin: either will do
	}
	return e
}

// ExplainStage implements policy.StageExplainer.
func (s *Shedder) ExplainStage() policy.Stage {
	limit := fmt.Sprintf("a fixed limit of %d in flight", s.Limit())
	if g := s.adaptive; g != nil {
		limit = fmt.Sprintf("an adaptive limit (now %d, within %v–%v) that follows latency", s.Limit(), g.min, g.max)
		if g.cpu != nil {
			limit += fmt.Sprintf(", and, while this process's own work queues for its CPUs (over %d goroutines a CPU waiting, %v each), refuses what the CPUs cannot serve", cpuRunnable, g.cpu.target)
		}
	}
	queue := "no queue"
	if s.opts.Queue.Max > 0 {
		queue = fmt.Sprintf("a queue of %d (%v, or %v under a standing queue)", s.opts.Queue.Max, s.queueInterval(), s.opts.Queue.Target)
	}
	return policy.Stage{
		Summary: fmt.Sprintf("shedder %q admits work up to %s, with %s; retries may fill %v%% of the limit", s.name, limit, queue, s.sheddable*100),
		Refusal: fmt.Sprintf("shedder %q refuses work beyond its limit at once (shed.ErrShed; %d with Retry-After as middleware)", s.name, s.status),
	}
}
