package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	// DefaultMaxConcurrent is how many calls may run at once when
	// Options.MaxConcurrent is 0.
	DefaultMaxConcurrent = 10
)

// The reasons a bulkhead gives in its policy.RejectError and its event.Rejected.
const (
	ReasonLimit    = "limit"    // every slot was taken and no call may wait (MaxQueue 0)
	ReasonQueue    = "queue"    // every slot was taken and MaxQueue calls were waiting already
	ReasonWait     = "wait"     // the call waited MaxWait for a slot
	ReasonDeadline = "deadline" // the call's deadline came before a slot; it matches context.DeadlineExceeded
)

var (
	// ErrFull is matched by every refusal of a bulkhead. A refusal is a
	// *policy.RejectError whose Err is ErrFull. It matches policy.ErrRejected too.
	ErrFull = errors.New("bulkhead: full")
	// ErrInvalidOptions is matched by New's errors for bad options.
	ErrInvalidOptions = errors.New("bulkhead: invalid options")

	// errFullDeadline is the Err of a ReasonDeadline refusal. It is made once, so
	// such a refusal allocates no more than the others.
	errFullDeadline = errors.Join(ErrFull, context.DeadlineExceeded)
)

// Options configure a [Bulkhead]. The zero value runs 10 calls at once, and lets
// none wait.
type Options struct {
	// Name names the bulkhead in events, metrics and errors. Required.
	Name string
	// MaxConcurrent is how many calls (attempts, inside a retry) may run at once,
	// ≥ 1. 0 means DefaultMaxConcurrent (10).
	MaxConcurrent int
	// MaxQueue is how many more may wait for a slot, ≥ 0. 0 means none waits: a
	// call that finds every slot taken is refused at once.
	MaxQueue int
	// MaxWait is the longest a call waits for a slot, ≥ 0. 0 means as long as its
	// context allows. A call never waits past its context's deadline either way.
	MaxWait time.Duration
	// Clock times waits and slot holds; nil means clock.System().
	Clock clock.Clock
}

// Bulkhead is a cap on concurrent calls to one dependency; its kind is [Kind]. It
// is safe for concurrent use. Pipelines that share one share its slots. Build it
// with [New]; the zero value is not usable.
type Bulkhead struct {
	name     string
	max      int
	maxQueue int64
	maxWait  time.Duration
	clock    clock.Clock

	slots   chan struct{} // one element per slot taken
	waiting atomic.Int64  // calls waiting for a slot
	hold    atomic.Int64  // mean time a slot is held, in ns (an exponentially weighted mean)
	timed   atomic.Int64  // slot holds timed, counted up to holdWarmup
	refused atomic.Uint64
}

// New returns a bulkhead named o.Name; the name labels its refusals, events and
// series. Or it returns an error matching ErrInvalidOptions naming the bad field.
func New(o Options) (*Bulkhead, error) {
	name := o.Name
	bad := func(format string, args ...any) (*Bulkhead, error) {
		return nil, fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidOptions, name}, args...)...)
	}
	switch {
	case name == "":
		return bad("name is empty; want the dependency's name")
	case o.MaxConcurrent < 0:
		return bad("MaxConcurrent is %d; want ≥ 1, or 0 for the default %d", o.MaxConcurrent, DefaultMaxConcurrent)
	case o.MaxQueue < 0:
		return bad("MaxQueue is %d; want ≥ 0 (0: no call waits)", o.MaxQueue)
	case o.MaxWait < 0:
		return bad("MaxWait is %v; want ≥ 0 (0: as long as the call's context allows)", o.MaxWait)
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	return &Bulkhead{name: name, max: o.MaxConcurrent, maxQueue: int64(o.MaxQueue), maxWait: o.MaxWait,
		clock: clock.Or(o.Clock), slots: make(chan struct{}, o.MaxConcurrent)}, nil
}

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }

// Placement: a bulkhead may queue a call, so it is not prompt.
func (b *Bulkhead) Placement() policy.Placement { return policy.Placement{Kind: Kind} }

// Limit returns MaxConcurrent.
func (b *Bulkhead) Limit() int { return b.max }

var _ policy.Publisher = (*Bulkhead)(nil)

// Gauges implements policy.Publisher: the slots taken, the calls waiting and the
// limit.
func (b *Bulkhead) Gauges() []policy.Gauge {
	return []policy.Gauge{
		{Name: "inflight", Help: "Calls holding a bulkhead slot now.",
			Value: func() float64 { return float64(b.InFlight()) }},
		{Name: "waiting", Help: "Calls waiting for a bulkhead slot now.",
			Value: func() float64 { return float64(b.Waiting()) }},
		{Name: "limit", Help: "Calls a bulkhead lets run at once (MaxConcurrent).",
			Value: func() float64 { return float64(b.Limit()) }},
	}
}

// InFlight returns how many slots are taken now.
func (b *Bulkhead) InFlight() int { return len(b.slots) }

// Waiting returns how many calls wait for a slot now.
func (b *Bulkhead) Waiting() int { return int(b.waiting.Load()) }

// Refused returns how many calls the bulkhead has refused so far.
func (b *Bulkhead) Refused() uint64 { return b.refused.Load() }

// MeanHold returns the mean time a call has held its slot, recent calls weighing
// most. It is over the calls timed: the first 16, then one in 16. It is 0 before
// any ended.
func (b *Bulkhead) MeanHold() time.Duration { return time.Duration(b.hold.Load()) }

// Bind returns the Runner that admits each call (or attempt, inside a retry).
func (b *Bulkhead) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return &runner{b: b, next: next, obs: env.Observer, pipeline: env.Pipeline,
		needs: event.NeedsOf(env.Observer, event.Rejected)}
}

type runner struct {
	b        *Bulkhead
	next     policy.Runner
	obs      event.Observer
	pipeline string
	needs    event.Needs
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	b := r.b
	select {
	case b.slots <- struct{}{}:
	default:
		if err := r.wait(ctx); err != nil {
			return err
		}
	}
	if b.timed.Load() >= holdWarmup && rand.Uint32()%holdEvery != 0 {
		defer func() { <-b.slots }() // deferred, so a panicking fn gives its slot back
		return r.next.Run(ctx, fn)
	}
	w := clock.StartStopwatch(b.clock, event.NeedsElapsed)
	defer func() {
		_, held := w.Stop()
		<-b.slots
		b.observeHold(held)
	}()
	return r.next.Run(ctx, fn)
}

// Slot holds are timed for the mean the Retry-After estimate reads. Every one of
// the first holdWarmup is timed, then one in holdEvery, drawn at random. Two clock
// readings would be most of the cost of a call through the bulkhead.
const (
	holdWarmup = 16
	holdEvery  = 16
)

// wait takes a place in the queue. It waits for a slot, MaxWait or the end of ctx,
// whichever comes first. It returns nil holding a slot.
func (r *runner) wait(ctx context.Context) error {
	b := r.b
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		n := b.waiting.Load()
		if n >= b.maxQueue {
			reason := ReasonQueue
			if b.maxQueue == 0 {
				reason = ReasonLimit
			}
			return r.refuse(ctx, reason, n, 0)
		}
		if b.waiting.CompareAndSwap(n, n+1) {
			break
		}
	}
	defer b.waiting.Add(-1)

	start := b.clock.Now()
	limit, byDeadline := b.maxWait, false
	if d, ok := ctx.Deadline(); ok {
		left := d.Sub(start)
		if left <= 0 {
			return r.refuse(ctx, ReasonDeadline, b.waiting.Load()-1, 0)
		}
		if limit == 0 || left <= limit {
			limit, byDeadline = left, true
		}
	}
	var timeout <-chan time.Time
	if limit > 0 && !byDeadline {
		t := b.clock.NewTimer(limit)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-timeout:
		return r.refuse(ctx, ReasonWait, b.waiting.Load()-1, b.clock.Now().Sub(start))
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return r.refuse(ctx, ReasonDeadline, b.waiting.Load()-1, b.clock.Now().Sub(start))
		}
		return ctx.Err() // the caller's own cancellation
	}
}

// refuse builds the refusal of a call that found every slot taken, and queued
// calls waiting ahead of it. It reports the refusal.
func (r *runner) refuse(ctx context.Context, reason string, queued int64, waited time.Duration) error {
	b := r.b
	b.refused.Add(1)
	err := ErrFull
	if reason == ReasonDeadline {
		err = errFullDeadline
	}
	e := &policy.RejectError{Policy: Kind, Name: b.name, Reason: reason, RetryAfter: b.estimate(max(queued, 0)), Err: err}
	if r.needs != event.NeedsNothing {
		r.obs.Observe(event.Event{Kind: event.Rejected, Pipeline: r.pipeline, Stage: Kind, Source: b.name, Reason: reason,
			Time:  clock.StartStopwatch(b.clock, r.needs).Started(),
			Delay: e.RetryAfter, Elapsed: waited, Err: e, Context: ctx})
	}
	return e
}

// estimate is when a call arriving behind queued waiting calls may expect a slot.
// A slot frees every MeanHold ÷ MaxConcurrent on average, and queued+1 must free.
func (b *Bulkhead) estimate(queued int64) time.Duration {
	hold := b.hold.Load()
	if hold <= 0 {
		return 0
	}
	per := hold / int64(b.max)
	if per > math.MaxInt64/(queued+1) {
		return math.MaxInt64
	}
	return time.Duration(per * (queued + 1))
}

// observeHold folds one slot hold into the mean, weighing it 1/8.
func (b *Bulkhead) observeHold(d time.Duration) {
	if b.timed.Load() < holdWarmup {
		b.timed.Add(1)
	}
	if d <= 0 {
		return
	}
	for {
		old := b.hold.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if b.hold.CompareAndSwap(old, next) {
			return
		}
	}
}

// ExplainStage implements policy.StageExplainer.
func (b *Bulkhead) ExplainStage() policy.Stage {
	wait := "none waits for a slot"
	if b.maxQueue > 0 {
		limit := "as long as its deadline allows"
		if b.maxWait > 0 {
			limit = fmt.Sprintf("up to %v, never past its deadline", b.maxWait)
		}
		wait = fmt.Sprintf("%d more wait for a slot, each %s", b.maxQueue, limit)
	}
	refused := fmt.Sprintf("finds its %d slots taken", b.max)
	switch {
	case b.maxQueue > 0 && b.maxWait > 0:
		refused = fmt.Sprintf("finds its %d slots taken and %d waiting, or has waited %v or until its deadline", b.max, b.maxQueue, b.maxWait)
	case b.maxQueue > 0:
		refused = fmt.Sprintf("finds its %d slots taken and %d waiting, or has waited until its deadline", b.max, b.maxQueue)
	}
	st := policy.Stage{
		Summary: fmt.Sprintf("bulkhead %q: at most %d at once (calls outside the retry, attempts inside it); %s", b.name, b.max, wait),
		Refusal: fmt.Sprintf("bulkhead %q refuses a call that %s (bulkhead.ErrFull), with a Retry-After from the mean time a call holds its slot",
			b.name, refused),
	}
	if b.maxQueue > 0 {
		st.Wait, st.WaitUnbounded = b.maxWait, b.maxWait == 0
	}
	return st
}
