package redeliver

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/jitter"
)

// Defaults for zero Options fields.
const (
	DefaultBase          = 10 * time.Second
	DefaultCap           = 15 * time.Minute
	DefaultMaxDeliveries = 5
	// SQSMaxDelay is the longest SQS lets a message stay invisible: the visibility
	// timeout's limit. Set it as MaxDelay for SQS.
	SQSMaxDelay = 12 * time.Hour
)

// ErrInvalidOptions is matched by New's errors for bad Options.
var ErrInvalidOptions = errors.New("redeliver: invalid options")

// Reasons a Decision gives.
const (
	ReasonSuccess   = "success"   // the delivery succeeded: acknowledge it
	ReasonRetry     = "retry"     // redeliver after Delay
	ReasonPermanent = "permanent" // the error is permanent: dead-letter at once
	ReasonExhausted = "exhausted" // MaxDeliveries failed: dead-letter
)

// Decision is what to do with a delivery.
type Decision struct {
	// Retry: redeliver the message after Delay. That is, negative-acknowledge it with a
	// delay, or extend its visibility.
	Retry bool
	Delay time.Duration
	// DeadLetter: move the message to the dead-letter queue and stop delivering it.
	DeadLetter bool
	// Reason is one of the Reason constants.
	Reason string
}

// A Backoff computes the delay before a redelivery. Package retry's strategies
// (retry.Full, Equal, Decorrelated, None, GRPC) are Backoffs.
//
// Implementers:
//   - Delay must be safe for concurrent use.
//   - n is the failed delivery's count, 1 for the first.
//   - prev is the previous delivery's window, min(cap, base·2^(n−2)); 0 for n = 1.
//   - base and cap are Options.Base and Options.Cap.
//
// The Schedule clamps whatever Delay returns into [0, Cap].
type Backoff interface {
	Delay(n int, prev, base, cap time.Duration, r jitter.Rand) time.Duration
}

// Options configure a [Schedule]. The zero value is valid: see the package defaults.
type Options struct {
	// Base and Cap bound the backoff as in package retry; 0 means DefaultBase (10 s)
	// and DefaultCap (15 min).
	Base, Cap time.Duration
	// Strategy computes each delay from the delivery count; nil means full jitter, as
	// retry.Full. No state travels with a message. So a strategy that chains on the
	// previous delay (Decorrelated) gets the largest delay of the previous delivery.
	Strategy Backoff
	// MaxDeliveries is how many deliveries may fail before the message is
	// dead-lettered; 0 means DefaultMaxDeliveries (5).
	MaxDeliveries int
	// MaxDelay bounds every delay, server hints included; 0 means no bound. It is a
	// broker's limit, such as SQSMaxDelay.
	MaxDelay time.Duration
	// ShouldRetry says whether an error may be retried; nil means every error not
	// marked fault.Permanent.
	ShouldRetry func(error) bool
	// Rand draws the jitter; nil means jitter.System().
	Rand jitter.Rand
}

// Schedule decides redeliveries. It holds its options and counts its decisions. It is
// safe for concurrent use. Build it with [New].
type Schedule struct {
	o Options
	r jitter.Rand

	deliveries, permanent, exhausted atomic.Uint64
	delays                           [len(delayBounds) + 1]atomic.Uint64 // retries by delay, per bucket; the last is beyond every bound
	delaySum                         atomic.Int64                        // nanoseconds
}

// delayBounds are the upper bounds of the buckets [Counts] sorts redelivery delays
// into: job-sized, from a second to SQS's 12 h.
var delayBounds = [...]time.Duration{time.Second, 10 * time.Second, time.Minute,
	5 * time.Minute, 15 * time.Minute, time.Hour, 12 * time.Hour}

// DelayBounds returns the upper bounds of the delay buckets of [Counts]: 1 s, 10 s,
// 1 min, 5 min, 15 min, 1 h, 12 h. The slice is a copy.
func DelayBounds() []time.Duration { return append([]time.Duration(nil), delayBounds[:]...) }

// Counts are a Schedule's decisions so far, for metrics. Package metrics exports them
// with AddRedeliver, through [Schedule.Decisions] and [Schedule.Delays].
type Counts struct {
	Deliveries uint64 // every delivery decided: succeeded, redelivered or dead-lettered
	Permanent  uint64 // dead-lettered at once: a permanent error
	Exhausted  uint64 // dead-lettered after MaxDeliveries
	// Retries[i] counts the redeliveries whose delay was at most DelayBounds()[i]. The
	// counts are cumulative, as a histogram's buckets are. Retries[len(DelayBounds())]
	// counts them all.
	Retries  []uint64
	DelaySum time.Duration // the sum of the redeliveries' delays
}

// Counts returns the Schedule's decisions so far. The fields are read one by one, so a
// decision made meanwhile may show in some and not yet in others.
func (p *Schedule) Counts() Counts {
	c := Counts{}
	c.Deliveries, c.Permanent, c.Exhausted = p.Decisions()
	_, c.Retries, c.DelaySum = p.Delays()
	return c
}

// Decisions returns how many deliveries the Schedule decided so far. Of those, it
// counts the ones dead-lettered for a permanent error and after MaxDeliveries. These
// are [Counts]' first three fields.
func (p *Schedule) Decisions() (deliveries, permanent, exhausted uint64) {
	return p.deliveries.Load(), p.permanent.Load(), p.exhausted.Load()
}

// Delays returns the redeliveries so far as a histogram of their delays. bounds are
// [DelayBounds]. cumulative[i] counts the delays of at most bounds[i], and
// cumulative[len(bounds)] counts them all. sum adds up every delay. The slices are
// fresh copies.
func (p *Schedule) Delays() (bounds []time.Duration, cumulative []uint64, sum time.Duration) {
	cumulative = make([]uint64, len(p.delays))
	var total uint64
	for i := range p.delays {
		total += p.delays[i].Load()
		cumulative[i] = total
	}
	return DelayBounds(), cumulative, time.Duration(p.delaySum.Load())
}

// New returns a Schedule, or an error matching ErrInvalidOptions that names the field.
func New(o Options) (*Schedule, error) {
	bad := check.Invalid[*Schedule](ErrInvalidOptions)
	switch {
	case o.Base < 0:
		return bad("Base is %v; want > 0, or 0 for the default %v", o.Base, DefaultBase)
	case o.Cap < 0:
		return bad("Cap is %v; want > 0, or 0 for the default %v", o.Cap, DefaultCap)
	case o.MaxDeliveries < 0:
		return bad("MaxDeliveries is %d; want ≥ 1, or 0 for the default %d", o.MaxDeliveries, DefaultMaxDeliveries)
	case o.MaxDelay < 0:
		return bad("MaxDelay is %v; want ≥ 0", o.MaxDelay)
	}
	if o.Base == 0 {
		o.Base = DefaultBase
	}
	if o.Cap == 0 {
		o.Cap = max(DefaultCap, o.Base)
	}
	if o.Cap < o.Base {
		return bad("Cap is %v, below Base %v; want Cap ≥ Base", o.Cap, o.Base)
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = DefaultMaxDeliveries
	}
	if o.Strategy == nil {
		o.Strategy = full{}
	}
	return &Schedule{o: o, r: jitter.Or(o.Rand)}, nil
}

// MaxDeliveries returns how many deliveries may fail before a message is dead-lettered.
func (p *Schedule) MaxDeliveries() int { return p.o.MaxDeliveries }

// Decide says what to do with delivery number deliveries (1-based: the first delivery
// is 1) that ended with err.
func (p *Schedule) Decide(deliveries int, err error) Decision {
	p.deliveries.Add(1)
	if err == nil {
		return Decision{Reason: ReasonSuccess}
	}
	if p.isPermanent(err) {
		p.permanent.Add(1)
		return Decision{DeadLetter: true, Reason: ReasonPermanent}
	}
	if deliveries >= p.o.MaxDeliveries {
		p.exhausted.Add(1)
		return Decision{DeadLetter: true, Reason: ReasonExhausted}
	}
	n := max(deliveries, 1)
	var last time.Duration // the previous delivery's largest delay, for chaining strategies
	if n > 1 {
		last = window(n-1, p.o.Base, p.o.Cap)
	}
	d := min(max(p.o.Strategy.Delay(n, last, p.o.Base, p.o.Cap, p.r), 0), p.o.Cap)
	if hint, ok := fault.Hint(err); ok {
		d = max(d, hint)
	}
	if p.o.MaxDelay > 0 {
		d = min(d, p.o.MaxDelay)
	}
	bucket := len(delayBounds)
	for i, b := range delayBounds {
		if d <= b {
			bucket = i
			break
		}
	}
	p.delays[bucket].Add(1)
	p.delaySum.Add(int64(d))
	return Decision{Retry: true, Delay: d, Reason: ReasonRetry}
}

func (p *Schedule) isPermanent(err error) bool {
	if p.o.ShouldRetry != nil {
		return !p.o.ShouldRetry(err)
	}
	return fault.Of(err).Permanent
}

// full is the default Backoff, "full jitter": uniform in [0, min(cap, base·2^(n−1))).
// It draws exactly as retry.Full does.
type full struct{}

func (full) Delay(n int, _, base, cap time.Duration, r jitter.Rand) time.Duration {
	w := window(n, base, cap)
	if w <= 0 {
		return 0
	}
	return time.Duration(r.Float64() * float64(w))
}

// window returns min(cap, base·2^(n−1)) without overflowing.
func window(n int, base, cap time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 63 {
		return cap
	}
	w := float64(base) * math.Ldexp(1, n-1)
	if w >= float64(cap) {
		return cap
	}
	return time.Duration(w)
}
