package retry

import (
	"context"
	"math"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	DefaultMaxAttempts  = 3
	DefaultBase         = 100 * time.Millisecond
	DefaultCap          = 5 * time.Second
	DefaultMaxHintDelay = 30 * time.Second
)

// Options configure a [Retry]. The zero value is valid: 3 attempts, full jitter
// over 100 ms doubling to 5 s, the allow-list classifier.
type Options struct {
	// MaxAttempts counts every attempt, the first included. 0 means
	// DefaultMaxAttempts (3). 1 means never retry. Negative is refused.
	MaxAttempts int
	// Base is the first backoff window; 0 means DefaultBase (100 ms).
	Base time.Duration
	// Cap bounds the backoff window. 0 means DefaultCap (5 s), or Base if Base is
	// larger than 5 s. A Cap below Base is refused, except with the GRPC strategy.
	// That strategy reads Cap as A6's maxBackoff, and jitters up to 1.2·Cap.
	Cap time.Duration
	// Strategy computes each backoff; nil means Full.
	Strategy Strategy
	// ShouldRetry decides whether an attempt's error may be retried. Nil means
	// DefaultShouldRetry. Whatever it says, some errors are never retried: those
	// matching policy.ErrRejected or context.Canceled, and those marked Permanent.
	// Nothing is retried once the call's context is done.
	ShouldRetry func(error) bool
	// MaxHintDelay is the longest server hint (After, Retry-After) the retry waits
	// for. 0 means DefaultMaxHintDelay (30 s). A longer hint ends the call at once,
	// with the last error and Cause ErrHintTooLong. Coming back before the server
	// asked would only be refused again. The hint stays readable from the error with
	// fault.Hint.
	MaxHintDelay time.Duration
	// MinAttemptTime is the least time an attempt needs. A retry is not made if its
	// delay plus MinAttemptTime would end past the context's deadline. The call then
	// returns its last error at once, with Cause ErrDeadline. 0 means the limit of the
	// per-attempt timeout (deadline.NewPerAttempt) inside the retry, if there is one.
	// Else it means no minimum. A retry is then refused only when its delay alone
	// would reach the deadline. Negative means no minimum, even with a per-attempt
	// timeout.
	MinAttemptTime time.Duration
	// Clock times the sleeps; nil means clock.System(). The deadline check compares
	// Clock.Now() plus the next delay with the context's deadline. So a fake clock
	// used with real deadlines should start at the real time.
	Clock clock.Clock
	// Rand draws the jitter; nil means jitter.System().
	Rand jitter.Rand
}

// Retry is a retry policy (policy.KindRetry). It runs a call's attempts, sleeping a
// jittered backoff between them. It goes on while the error is retryable and
// attempts, budget and deadline remain. It stops if another layer owns retries on
// the call path.
//
// A Retry holds only its options. It is safe for concurrent use, and may be shared
// by pipelines. Build it with [New]; the zero value is not usable.
type Retry struct {
	max     int
	base    time.Duration
	cap     time.Duration
	ceiling time.Duration // the longest backoff: Cap, 1.2·Cap for GRPC
	maxHint time.Duration
	// minAttempt is Options.MinAttemptTime: > 0 set, 0 from the Env, < 0 none.
	minAttempt time.Duration
	strategy   Strategy
	should     func(error) bool
	clock      clock.Clock
	rand       jitter.Rand
}

// New returns a Retry with o's zero fields set to their defaults. Or it returns an
// error matching ErrInvalidOptions that names the bad field.
func New(o Options) (*Retry, error) {
	bad := check.Invalid[*Retry](ErrInvalidOptions)
	r := &Retry{max: o.MaxAttempts, base: o.Base, cap: o.Cap, maxHint: o.MaxHintDelay, minAttempt: o.MinAttemptTime,
		strategy: o.Strategy, should: o.ShouldRetry, clock: clock.Or(o.Clock), rand: jitter.Or(o.Rand)}
	switch {
	case r.max < 0:
		return bad("MaxAttempts is %d; want ≥ 1, or 0 for the default %d", r.max, DefaultMaxAttempts)
	case r.max == 0:
		r.max = DefaultMaxAttempts
	}
	switch {
	case r.base < 0:
		return bad("Base is %v; want > 0, or 0 for the default %v", r.base, DefaultBase)
	case r.base == 0:
		r.base = DefaultBase
	}
	switch {
	case r.cap < 0:
		return bad("Cap is %v; want ≥ Base (%v), or 0 for the default %v", r.cap, r.base, DefaultCap)
	case r.cap == 0:
		r.cap = max(DefaultCap, r.base)
	case r.cap < r.base && !isGRPC(o.Strategy):
		// GRPC alone reads a Cap below Base as A6 does: every delay at Cap.
		return bad("Cap is %v, below Base %v; want Cap ≥ Base", r.cap, r.base)
	}
	switch {
	case r.maxHint < 0:
		return bad("MaxHintDelay is %v; want ≥ 0", r.maxHint)
	case r.maxHint == 0:
		r.maxHint = DefaultMaxHintDelay
	}
	if r.minAttempt < 0 {
		r.minAttempt = -1
	}
	if r.strategy == nil {
		r.strategy = Full{}
	}
	if g, ok := r.strategy.(GRPC); ok && (g.Multiplier < 0 || math.IsNaN(g.Multiplier) || math.IsInf(g.Multiplier, 0)) {
		return bad("GRPC.Multiplier is %v; want a finite number > 0, or 0 for the default %v", g.Multiplier, DefaultGRPCMultiplier)
	}
	r.ceiling = ceiling(r.strategy, r.cap)
	return r, nil
}

// isGRPC reports whether s is the GRPC strategy.
func isGRPC(s Strategy) bool {
	_, ok := s.(GRPC)
	return ok
}

// MaxAttempts returns the number of attempts a call may make, the first included.
func (r *Retry) MaxAttempts() int { return r.max }

// Placement: the retry owns the pipeline's retries.
func (r *Retry) Placement() policy.Placement { return place }

// place is the placement of a retry and a hedge.
var place = policy.Placement{Kind: Kind, OwnsRetries: true, Prompt: true}

// Bind returns the Runner that runs the retry loop. It uses env.Budget if the
// pipeline has a budget outside the retry.
func (r *Retry) Bind(next policy.Runner, env policy.Env) policy.Runner {
	l := &runner{r: r, max: r.max, budget: env.Budget, reporter: newReporter(next, env, r.clock)}
	l.lease, _ = env.Budget.(policy.RetryLease)
	switch {
	case r.minAttempt > 0:
		l.minAttempt = r.minAttempt
	case r.minAttempt == 0:
		l.minAttempt = max(env.AttemptTimeout, 0)
	}
	return l
}

type runner struct {
	reporter
	r          *Retry
	max        int                // r.max, read on every call without a trip to r
	budget     policy.RetryBudget // nil: no budget
	lease      policy.RetryLease  // budget, if it prices and hears the end of each retry
	minAttempt time.Duration      // the least time a retry needs before the deadline
}

// reporter runs attempts and ends calls for a retry or a hedge, reporting both.
type reporter struct {
	next                 policy.Runner
	obs                  event.Observer // nil: no events
	pipeline             string
	clock                clock.Clock
	startNeeds, endNeeds event.Needs // what obs reads of attempt starts and ends
	// ends is obs when it reads nothing of attempt starts, and nothing of attempt
	// ends but their error, which it takes without an event.Event (package metrics'
	// observer does).
	ends attemptEnds
}

// attemptEnds is an observer whose AttemptEnded(err) is what its Observe does with
// an AttemptEnd event.
type attemptEnds interface {
	AttemptEnded(err error)
}

func newReporter(next policy.Runner, env policy.Env, clock clock.Clock) reporter {
	r := reporter{next: next, obs: env.Observer, pipeline: env.Pipeline, clock: clock,
		startNeeds: event.NeedsOf(env.Observer, event.AttemptStart), endNeeds: event.NeedsOf(env.Observer, event.AttemptEnd)}
	if r.startNeeds == event.NeedsNothing && r.endNeeds == event.NeedsEvent {
		r.ends, _ = env.Observer.(attemptEnds)
	}
	return r
}

// reason returns why err may be retried, or "" if it may not.
func (l *runner) reason(err error) string { return reasonOf(l.r.should, err) }

// reasonOf returns why err may be tried again, by should if it is set, or "".
func reasonOf(should func(error) bool, err error) string {
	if should == nil {
		return classify(err)
	}
	if err == nil || neverRetried(err) || !should(err) {
		return ""
	}
	switch m := fault.Of(err); {
	case m.Throttled:
		return ReasonThrottle
	case m.HasHint:
		return ReasonHint
	}
	return ReasonCustom
}

func (l *runner) Run(ctx context.Context, fn policy.Func) error {
	if l.lease == nil && l.max > 1 && !callpath.Owned(ctx) {
		// The common case, in a frame of its own: this retry owns the call path, and
		// the first attempt succeeds. The loop runs only once it fails.
		if l.budget != nil {
			l.budget.Deposit()
		}
		var err error
		if l.startNeeds|l.endNeeds == event.NeedsNothing {
			err = l.next.Run(callpath.WithAttempt(ctx, 1), fn) // unobserved: no call to attempt
		} else {
			err = l.attempt(callpath.WithAttempt(ctx, 1), fn, 1)
		}
		if err == nil {
			if l.budget != nil {
				l.budget.OnSuccess()
			}
			return nil
		}
		return l.retry(ctx, fn, true, l.budget, nil, err)
	}
	// A retry that can never retry does not claim the call path. Only the owner in
	// this process talks to the budget. A suppressed retry below it must not charge
	// it again. Under an owner in another process, this retry makes one attempt. Its
	// outcome is still told to the budget, though never as a withdrawal. It is
	// evidence about the backend that no one in this process counts otherwise. So
	// does gRFC A6: it counts every RPC of the channel.
	owner := l.max > 1 && !callpath.Owned(ctx)
	budget, lease := l.budget, l.lease
	if !owner {
		lease = nil
		if _, upstream, ok := callpath.Attempt(ctx); !ok || !upstream {
			budget = nil
		}
	}
	if budget != nil {
		budget.Deposit()
	}
	return l.retry(ctx, fn, owner, budget, lease, nil)
}

// retry runs the call's attempts from the first, or, given first, the error of a
// first attempt already made (and deposited for), from its outcome on.
func (l *runner) retry(ctx context.Context, fn policy.Func, owner bool, budget policy.RetryBudget, lease policy.RetryLease, first error) error {
	var prev time.Duration
	sincePush := 0                   // retries since the last pushback, for the backoff
	taken, leased := int64(0), false // what the lease took for the retry under way
	if lease != nil {
		defer func() {
			if leased {
				lease.End(taken, false) // the call ended before the retry was made, or panicked
			}
		}()
	}
	for n := 1; ; n++ {
		err := first
		if n > 1 || first == nil {
			actx := ctx
			if owner {
				actx = callpath.WithAttempt(ctx, n)
			}
			err = l.attempt(actx, fn, n)
		}
		if leased {
			leased = false
			lease.End(taken, err == nil)
		}
		if err == nil {
			if budget != nil {
				budget.OnSuccess()
			}
			return nil
		}
		if ctx.Err() != nil {
			return l.giveUp(ctx, n, ctxCause(ctx), err, "")
		}
		why := l.reason(err)
		marks := fault.Of(err)
		if why == "" {
			if marks.Stop && budget != nil {
				budget.OnFailure() // a server's "do not retry" still counts as a failure (A6)
			}
			return l.giveUp(ctx, n, ErrNotRetryable, err, "")
		}
		refused := marks.Refused
		if budget != nil && !refused {
			budget.OnFailure() // every retryable failure pays, the last one too (gRFC A6)
		}
		if n >= l.max {
			return l.giveUp(ctx, n, ErrExhausted, err, "")
		}
		if !owner {
			return l.giveUp(ctx, n, ErrOwner, err, event.SuppressedOwner)
		}

		// The backoff counts the retries since the last pushback. After a retry made
		// on a server's pushback, the next starts again from Base (gRFC A6).
		sincePush++
		delay := min(max(l.r.strategy.Delay(sincePush, prev, l.r.base, l.r.cap, l.r.rand), 0), l.r.ceiling)
		prev = delay
		if hint := marks.Hint; marks.HasHint {
			if hint > l.r.maxHint {
				// Coming back before the server asked would only be refused again.
				return l.giveUp(ctx, n, ErrHintTooLong, err, event.SuppressedHint)
			}
			if marks.Exact {
				delay = hint // gRPC pushback: exactly the server's delay
				sincePush, prev = 0, 0
			} else {
				spread := hint / 2
				if refused {
					// Every caller a server refused in one episode is told the same
					// time. Spread them over twice as wide.
					spread = hint
				}
				delay = max(delay, check.AddSat(hint, time.Duration(l.r.rand.Float64()*float64(spread))))
			}
		}
		if dl, ok := ctx.Deadline(); ok && !l.r.clock.Now().Add(check.AddSat(delay, l.minAttempt)).Before(dl) {
			return l.giveUp(ctx, n, ErrDeadline, err, event.SuppressedDeadline)
		}
		if lease != nil {
			if taken, leased = lease.Take(why); !leased {
				return l.giveUp(ctx, n, ErrBudget, err, event.SuppressedBudget)
			}
		} else if budget != nil && !budget.Withdraw() {
			return l.giveUp(ctx, n, ErrBudget, err, event.SuppressedBudget)
		}
		l.scheduled(ctx, n+1, delay, why, err)
		if !l.sleep(ctx, delay) {
			return l.giveUp(ctx, n, ctxCause(ctx), err, "")
		}
	}
}

// attempt runs attempt n and reports it.
func (l *reporter) attempt(ctx context.Context, fn policy.Func, n int) error {
	if l.startNeeds|l.endNeeds == event.NeedsNothing {
		return l.next.Run(ctx, fn)
	}
	if l.ends != nil {
		err := l.next.Run(ctx, fn)
		l.ends.AttemptEnded(err)
		return err
	}
	w := clock.StartStopwatch(l.clock, l.startNeeds|l.endNeeds)
	if l.startNeeds != event.NeedsNothing {
		l.obs.Observe(event.Event{Kind: event.AttemptStart, Pipeline: l.pipeline, Stage: Kind, Time: w.Started(), Attempt: n, Context: ctx})
	}
	err := l.next.Run(ctx, fn)
	if l.endNeeds != event.NeedsNothing {
		e := event.Event{Kind: event.AttemptEnd, Pipeline: l.pipeline, Stage: Kind, Attempt: n, Err: err, Context: ctx}
		e.Time, e.Elapsed = w.Stop()
		l.obs.Observe(e)
	}
	return err
}

// sleep waits d on the retry's clock. It returns false if ctx ended first. It never
// leaves the timer running. A server's shedder that admitted the call is told the
// call is paused meanwhile (callpath.Pause). A sleeping retry holds no slot.
func (l *runner) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	resume := callpath.Pause(ctx)
	defer resume()
	t := l.r.clock.NewTimer(d)
	select {
	case <-t.C():
		return ctx.Err() == nil
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// ctxCause says why a done context ended the call.
func ctxCause(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return ErrDeadline
	}
	return ErrCanceled
}

// scheduled reports that attempt n will start after delay, because of err of
// reason why. Err is nil for a hedge sent for want of an answer.
func (l *reporter) scheduled(ctx context.Context, n int, delay time.Duration, why string, err error) {
	if l.obs != nil {
		l.obs.Observe(event.Event{Kind: event.RetryScheduled, Pipeline: l.pipeline, Stage: Kind, Time: l.clock.Now(),
			Attempt: n, Delay: delay, Reason: why, Err: err, Context: ctx})
	}
}

// giveUp builds the error of a call that ends after n attempts. It reports a
// suppressed retry if suppressed names why one was.
func (l *reporter) giveUp(ctx context.Context, n int, cause, last error, suppressed string) error {
	err := &Error{Attempts: n, Cause: cause, Last: last}
	if suppressed != "" && l.obs != nil {
		l.obs.Observe(event.Event{Kind: event.RetrySuppressed, Pipeline: l.pipeline, Stage: Kind, Time: l.clock.Now(),
			Attempt: n, Reason: suppressed, Err: last, Context: ctx})
	}
	return err
}
