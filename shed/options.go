package shed

import (
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/jitter"
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

// ErrInvalidOptions is matched by New's errors for bad Options.
var ErrInvalidOptions = errors.New("shed: invalid options")

// Options configure a [Shedder]. The zero value is valid. It gives an adaptive limit
// starting at 1000 in flight, within [1, 1000], and a CPU guard at 20 ms. It gives a
// queue of 64 and status 429.
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
	// Breaker, if non-nil, guards the handler's dependency. While it is open, the
	// middleware answers 503 with the breaker's remaining open time as Retry-After. A
	// *breaker.Breaker has it. A nil pointer in it counts as no breaker.
	Breaker Breaker

	// Refusal is what a refused request is told.
	Refusal RefusalOptions

	// Observer, if non-nil, hears every refusal of the shedder as an event.Shed. That
	// is the middleware's refusals, Admit's and those of its pipelines. It is the
	// shedder's first subscriber ([Shedder.Subscribe]). So it hears each refusal once,
	// even when a pipeline subscribes it too.
	Observer event.Observer
	// Clock and Rand are seams for tests; nil means clock.System() and
	// jitter.System().
	Clock clock.Clock
	Rand  jitter.Rand
}

// Breaker is what the middleware reads of a breaker that guards the handler's
// dependency. A *breaker.Breaker has it.
type Breaker interface {
	// OpenNow reports whether the breaker refuses calls now and, if so, for how
	// much longer. It is asked on every request, so it must be cheap.
	OpenNow() (time.Duration, bool)
}

// noBreaker reports whether b is nil or holds a nil pointer, such as a
// *breaker.Breaker variable left unset. Either means no breaker.
func noBreaker(b Breaker) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// LimitOptions configure the concurrency limit. The zero value is the adaptive limit
// with its defaults.
type LimitOptions struct {
	// Fixed, if > 0, fixes the limit and turns the adaptive limit off; the other
	// fields must then be zero.
	Fixed int
	// Initial, Min and Max bound the adaptive limit. 0 means the Max
	// (DefaultInitialLimit), DefaultMinLimit (1) and DefaultMaxLimit (1000).
	Initial, Min, Max int
	// Smoothing is how far the limit moves towards its target in a window whose
	// latency is above Tolerance, in (0, 1]; 0 means DefaultSmoothing (0.7).
	Smoothing float64
	// Tolerance is how much latency may rise over the baseline before the limit
	// shrinks, ≥ 1; 0 means DefaultTolerance (1.5).
	Tolerance float64
	// Headroom is the least a window adds to the limit when the limit was full and
	// latency at the baseline. The limit grows to what the load needs by Little's law,
	// at most doubling, and less as latency nears Tolerance. 0 means DefaultHeadroom
	// (4).
	Headroom float64
	// Window is the sampling window of the adaptive limit. A window closes when it is
	// this old and holds MinSamples latencies. 0 means DefaultWindow (100 ms) and
	// DefaultMinSamples (10).
	Window     time.Duration
	MinSamples int
	// LatencySamples is how many latencies a window of the adaptive limit aims to hold;
	// 0 means DefaultLatencySamples (256). When a window admits more requests, the next
	// one times one request in k at random. Here k is the requests a window admits at
	// the rate of the one before ÷ LatencySamples. So a busy server does not read the
	// clock twice per request.
	LatencySamples int
	// SchedLatency also watches this process's CPUs. Say more than 16 goroutines a CPU
	// are runnable, and the 90th percentile of their waits for one is over
	// SchedLatency. Then requests are queueing where no concurrency limit sees them, as
	// on a CPU-bound server whose handlers run to completion one after another. The
	// shedder then refuses the share of new work its CPUs cannot serve (ReasonCPU).
	// Critical work is never refused, and sheddable work goes first. See the package
	// doc's CPU section. Waits caused by other processes do not lengthen this process's
	// queue and are not acted on. 0 means DefaultSchedLatency (20 ms).
	//
	// SchedLatencyOff (any negative value) turns the guard off. Do so where the process
	// runs CPU-heavy batch work beside its server. Its goroutines queue for the CPU
	// without the server being overloaded.
	SchedLatency time.Duration
}

// QueueOptions configure the queue of requests waiting for a slot. The zero value is
// a queue of DefaultMaxQueue (64) timed CoDel-style at 5 ms and 100 ms.
type QueueOptions struct {
	// Max is how many requests may wait for a slot; 0 means DefaultMaxQueue (64),
	// negative means no queue.
	Max int
	// Target and Interval time the queue CoDel-style. A request waits at most Interval,
	// or only Target while a standing queue exists (the queue has not been empty for
	// Interval). The newest is then served first. 0 means DefaultQueueTarget (5 ms) and
	// DefaultQueueInterval (100 ms).
	//
	// With the adaptive limit, a default Interval grows to 20 baseline latencies of the
	// work, at most 500 ms. That is 500 ms for 25 ms database queries, and 100 ms for
	// work under 5 ms. A queue is judged in the time of the work it holds, and a server
	// near its capacity keeps its answers.
	Target, Interval time.Duration
}

// RefusalOptions configure what a refused request is told. The zero value answers
// 429 with a Retry-After of at most DefaultMaxRetryAfter (30 s).
type RefusalOptions struct {
	// Status is the status of a refusal for want of a slot: 429 (the zero value)
	// or 503.
	Status int
	// MaxRetryAfter caps the Retry-After of refusals for want of a slot, jitter
	// included; 0 means DefaultMaxRetryAfter (30 s). The value follows the share of
	// requests refused (see [Shedder.RetryAfter]). It is sent with up to +50 % upward
	// jitter in whole seconds. An open breaker's refusals say the breaker's own open
	// time, and a quota's the client's next token.
	MaxRetryAfter time.Duration
}

// queueOptions checks o.Queue and resolves its defaults.
func (s *Shedder) queueOptions(o Options) error {
	bad := func(format string, args ...any) error { return check.Err(ErrInvalidOptions, format, args...) }
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
	// A default gives way to the value the user set. The interval is at least the
	// target, and the target at most the interval.
	s.intervalAuto = o.Queue.Interval == 0
	s.opts.Queue.Target = orDefaultD(o.Queue.Target, min(DefaultQueueTarget, orDefaultD(o.Queue.Interval, DefaultQueueTarget)))
	s.opts.Queue.Interval = orDefaultD(o.Queue.Interval, max(DefaultQueueInterval, s.opts.Queue.Target))
	return nil
}

// refusalOptions checks o.Refusal, resolves its defaults and makes the refusals' cache.
func (s *Shedder) refusalOptions(o Options) error {
	bad := func(format string, args ...any) error { return check.Err(ErrInvalidOptions, format, args...) }
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
	return nil
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
// range the user set: Limit.Max 10 alone lowers the initial limit to 10. Values the
// user set that contradict each other are refused, naming them.
func (s *Shedder) limits(o Options) error {
	if o.Limit.Fixed < 0 {
		return check.Err(ErrInvalidOptions, "Limit.Fixed is %d; want ≥ 1, or 0 for an adaptive limit", o.Limit.Fixed)
	}
	if o.Limit.Fixed > 0 {
		if set := adaptiveFields(o); len(set) > 0 {
			return check.Err(ErrInvalidOptions, "Limit.Fixed is %d (a fixed limit) and %s is set, which applies to the adaptive limit only; set one or the other",
				o.Limit.Fixed, strings.Join(set, ", "))
		}
		s.limit.Store(int64(o.Limit.Fixed))
		return nil
	}
	lo, hi, initial, err := limitRange(o.Limit)
	if err != nil {
		return err
	}
	g, err := newGradient(o.Limit, lo, hi)
	if err != nil {
		return err
	}
	g.limit = float64(initial)
	s.adaptive = g
	s.limit.Store(int64(initial))
	return nil
}

// limitRange checks the adaptive limit's counts and bounds, and resolves their
// defaults within what the user set.
func limitRange(l LimitOptions) (lo, hi, initial int, err error) {
	bad := func(format string, args ...any) (int, int, int, error) {
		return 0, 0, 0, check.Err(ErrInvalidOptions, format, args...)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Limit.Initial", l.Initial}, {"Limit.Min", l.Min}, {"Limit.Max", l.Max}, {"Limit.MinSamples", l.MinSamples},
		{"Limit.LatencySamples", l.LatencySamples}} {
		if f.v < 0 {
			return bad("%s is %d; want ≥ 1, or 0 for the default", f.name, f.v)
		}
	}
	lo, hi, initial = l.Min, l.Max, l.Initial
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
	return lo, hi, initial, nil
}

// newGradient returns the adaptive limit within [lo, hi], its settings checked.
func newGradient(l LimitOptions, lo, hi int) (*gradient, error) {
	bad := func(format string, args ...any) (*gradient, error) {
		return nil, check.Err(ErrInvalidOptions, format, args...)
	}
	g := &gradient{
		min: float64(lo), max: float64(hi),
		smoothing: orDefaultF(l.Smoothing, DefaultSmoothing), tol: orDefaultF(l.Tolerance, DefaultTolerance),
		headroom: orDefaultF(l.Headroom, DefaultHeadroom), window: orDefaultD(l.Window, DefaultWindow),
		minSamples: orDefault(l.MinSamples, DefaultMinSamples),
		samples:    int64(orDefault(l.LatencySamples, DefaultLatencySamples)),
		probeAfter: probeAfter,
	}
	g.stride.Store(1)
	switch {
	case !(g.smoothing > 0 && g.smoothing <= 1):
		return bad("Limit.Smoothing is %v; want a number in (0, 1]", l.Smoothing)
	case !(g.tol >= 1) || math.IsInf(g.tol, 0):
		return bad("Limit.Tolerance is %v; want ≥ 1", l.Tolerance)
	case !(g.headroom >= 0) || math.IsInf(g.headroom, 0):
		return bad("Limit.Headroom is %v; want ≥ 0", l.Headroom)
	case g.window < 0:
		return bad("Limit.Window is %v; want > 0, or 0 for the default %v", l.Window, DefaultWindow)
	case l.SchedLatency >= 0:
		g.cpu = &cpuGuard{target: orDefaultD(l.SchedLatency, DefaultSchedLatency), read: newSchedReader().read, queue: runnableQueue}
	}
	return g, nil
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
