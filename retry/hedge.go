package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero HedgeOptions fields, Polly's (v8 HedgingStrategyOptions: one
// hedged attempt after 2 s).
const (
	DefaultHedgeMaxAttempts = 2
	DefaultHedgeDelay       = 2 * time.Second
	// HedgeMaxAttemptsLimit is the most HedgeOptions.MaxAttempts may be, as gRFC A6 bounds a hedging
	// policy's maxAttempts: more attempts in flight than that only add load.
	HedgeMaxAttemptsLimit = 5
)

// ReasonHedge is the Reason of the retry_scheduled event that reports a hedged attempt.
const ReasonHedge = "hedge"

// HedgePanicSource is the Source of the event.Panic a Hedge reports.
const HedgePanicSource = "hedge"

// errHedgeGoexit is the error of a hedged attempt that called runtime.Goexit.
var errHedgeGoexit = errors.New("retry: a hedged attempt called runtime.Goexit")

// HedgeOptions configure a [Hedge]. The zero value is valid: one hedged attempt if
// the first has not answered within 2 s.
type HedgeOptions struct {
	// MaxAttempts is how many attempts a call may have in flight, the first included,
	// in [2, 5]; 0 means DefaultHedgeMaxAttempts (2).
	MaxAttempts int
	// Delay is how long an attempt may go unanswered before the next one starts
	// (gRFC A6's hedgingDelay; set it near the dependency's p95 latency); 0 means
	// DefaultHedgeDelay (2 s). Negative means none: all attempts start at once.
	Delay time.Duration
	// ShouldRetry says whether an attempt's error is non-fatal (A6's
	// nonFatalStatusCodes): the next attempt starts at once instead of after Delay.
	// nil means the retry classification (fault.Retryable, timeouts, network errors,
	// hints). A fatal error ends the call at once, cancelling the other attempts.
	ShouldRetry func(error) bool
	// MaxHintDelay bounds a server's pushback: a hint (Retry-After, gRPC pushback) up
	// to it delays the next attempt by the hint; a longer one stops hedging. 0 means
	// DefaultMaxHintDelay.
	MaxHintDelay time.Duration
	// Clock times the delays; nil means policy.SystemClock().
	Clock policy.Clock
}

// Hedge sends another attempt when an attempt is slow to answer, without waiting for
// it to fail: after Delay with no answer, a second attempt starts; after another Delay
// a third, up to MaxAttempts in flight. The first success wins: the other attempts
// are cancelled, and the call returns once they have returned (so nothing outlives
// it). A non-fatal failure starts the next attempt at once; a fatal one ends the call.
// Anchors: gRFC A6's hedgingPolicy, Polly's hedging, Envoy's hedge_on_per_try_timeout.
//
// For the ordering rules a Hedge is a retry (policy.KindRetry): a pipeline has one
// retry or one hedge (O2); a budget outside it (O4) is asked before every extra
// attempt, and a per-attempt timeout inside it (O3) bounds each attempt. It owns the
// call path as a retry does: each attempt's context is marked with its number, and a
// hedge running under another owner makes one attempt. It makes one attempt, too,
// for work that may not be repeated (callpath.WithoutRepeats: policyhttp marks every
// request that is not idempotent).
//
// Attempts run on goroutines of their own, where no caller could recover a panic: a
// panic in an attempt (fn, a stage below the hedge or its observer) is recovered and
// becomes that attempt's error, a *policy.PanicError with the panic's value and stack,
// reported as a event.Panic (Source HedgePanicSource); it is not retryable, so
// the call ends with it (a *Error that unwraps to it). A call that makes one attempt
// runs it on the caller's goroutine, where a panic propagates unchanged.
//
// fn runs concurrently with itself, once per attempt in flight: it must keep each
// attempt's result apart, and keep one only if callpath.Win says its attempt won the
// race (policyhttp keeps the winner's response and closes the others'). The winner's
// context lives on until the caller's callpath.Releaser releases it.
type Hedge struct {
	max     int
	delay   time.Duration
	maxHint time.Duration
	should  func(error) bool
	clock   policy.Clock
}

// NewHedge returns a Hedge with o's zero fields set to their defaults, or an error
// matching ErrInvalidOptions that names the bad field.
func NewHedge(o HedgeOptions) (*Hedge, error) {
	h := &Hedge{max: o.MaxAttempts, delay: o.Delay, maxHint: o.MaxHintDelay, should: o.ShouldRetry, clock: policy.ClockOr(o.Clock)}
	switch {
	case h.max == 0:
		h.max = DefaultHedgeMaxAttempts
	case h.max < 2 || h.max > HedgeMaxAttemptsLimit:
		return nil, fmt.Errorf("%w: HedgeOptions.MaxAttempts is %d; want 2 to %d, or 0 for the default %d",
			ErrInvalidOptions, h.max, HedgeMaxAttemptsLimit, DefaultHedgeMaxAttempts)
	}
	switch {
	case h.delay == 0:
		h.delay = DefaultHedgeDelay
	case h.delay < 0:
		h.delay = 0
	}
	switch {
	case h.maxHint == 0:
		h.maxHint = DefaultMaxHintDelay
	case h.maxHint < 0:
		return nil, fmt.Errorf("%w: HedgeOptions.MaxHintDelay is %v; want ≥ 0", ErrInvalidOptions, h.maxHint)
	}
	return h, nil
}

// MustNewHedge is like [NewHedge] but panics on bad options.
func MustNewHedge(o HedgeOptions) *Hedge {
	h, err := NewHedge(o)
	if err != nil {
		panic(err)
	}
	return h
}

// MaxAttempts returns the most attempts a call may make, the first included.
func (h *Hedge) MaxAttempts() int { return h.max }

// Kind returns policy.KindRetry: for the ordering rules a hedge is a retry.
func (h *Hedge) Kind() policy.Kind { return policy.KindRetry }

// Bind returns the Runner that hedges each call, using env.Budget if the pipeline
// has a budget outside it.
func (h *Hedge) Bind(next policy.Runner, env policy.Env) policy.Runner {
	r := &hedger{h: h, budget: env.Budget, reporter: newReporter(next, env, h.clock)}
	r.lease, _ = env.Budget.(policy.RetryLease)
	return r
}

// ExplainStage implements policy.StageExplainer.
func (h *Hedge) ExplainStage() policy.Stage {
	st := policy.Stage{Attempts: h.max, Overlapping: true,
		Summary: fmt.Sprintf("hedges: up to %d attempts in flight, the next one starting after %v without an answer "+
			"(at once after a non-fatal failure, or after its server's hint, up to %v); the first success wins and the others are cancelled",
			h.max, h.delay, h.maxHint)}
	for range h.max - 1 {
		st.Sleeps = append(st.Sleeps, policy.Sleep{Min: h.delay, Mean: h.delay, Max: h.delay}) // the wait before each hedge, if no answer came
	}
	// A failure before the delay with a hint starts the next attempt after the hint:
	// up to the delay and the longest hint after the last.
	st.MaxHint = h.delay + h.maxHint
	return st
}

type hedger struct {
	reporter
	h      *Hedge
	budget policy.RetryBudget
	lease  policy.RetryLease
}

// outcome is one attempt's end.
type outcome struct {
	n   int
	err error
}

func (r *hedger) Run(ctx context.Context, fn policy.Func) error {
	h := r.h
	if callpath.Owned(ctx) {
		return r.attempt(ctx, fn, 1) // another layer owns the call path: one attempt
	}
	if !callpath.Repeatable(ctx) {
		return r.attempt(callpath.WithAttempt(ctx, 1), fn, 1) // the owner, of work that may be done once
	}
	budget, lease := r.budget, r.lease
	if budget != nil {
		budget.Deposit()
	}
	results := make(chan outcome, h.max) // never blocks an attempt: nothing outlives the call
	rctx, race := callpath.WithRace(ctx)
	var taken [HedgeMaxAttemptsLimit + 1]int64
	var leased [HedgeMaxAttemptsLimit + 1]bool
	// Each attempt has a context of its own: the losers' are cancelled, the winner's
	// lives on until the caller's Releaser says (its result may be read after Run).
	var cancels [HedgeMaxAttemptsLimit + 1]context.CancelFunc
	winner := 0
	defer func() {
		for n, cancel := range cancels {
			switch {
			case cancel == nil:
			case n == winner:
				callpath.DeferRelease(ctx, cancel)
			default:
				cancel()
			}
		}
	}()
	started, inFlight := 0, 0
	start := func(n int) {
		started, inFlight = n, inFlight+1
		actx, cancel := context.WithCancel(rctx)
		cancels[n] = cancel
		go func() {
			err := errHedgeGoexit // replaced unless the attempt calls runtime.Goexit
			defer func() {
				if v := recover(); v != nil {
					err = r.panicked(actx, n, v)
				}
				results <- outcome{n, err}
			}()
			err = r.attempt(callpath.WithAttempt(actx, n), fn, n)
		}()
	}
	// more asks the budget for an extra attempt, after an error of reason why.
	more := func(why string) bool {
		if started >= h.max {
			return false
		}
		switch {
		case lease != nil:
			t, ok := lease.Take(why)
			if !ok {
				return false
			}
			taken[started+1], leased[started+1] = t, true
		case budget != nil && !budget.Withdraw():
			return false
		}
		return true
	}
	// finish cancels the attempts still in flight, waits for them and returns the
	// last one's error.
	finish := func() (err error) {
		if winner == 0 {
			// An attempt that claimed the race keeps its result, and so its context, even
			// if the call ends on another attempt's error.
			winner = race.Winner()
		}
		for n, cancel := range cancels {
			if cancel != nil && n != winner {
				cancel()
			}
		}
		for ; inFlight > 0; inFlight-- {
			o := <-results
			if leased[o.n] {
				lease.End(taken[o.n], false)
			}
			err = o.err
		}
		return err
	}

	start(1)
	var timer policy.Timer
	var wake <-chan time.Time
	arm := func(d time.Duration) {
		if timer != nil {
			timer.Stop()
		}
		timer = h.clock.NewTimer(d)
		wake = timer.C()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last error
	hedging := true // false once the budget, the attempts or a hint stopped further hedges
	cause := ErrExhausted
	if h.delay == 0 {
		// No delay: every attempt at once (A6's hedgingDelay of 0), as far as the budget allows.
		for started < h.max {
			if !more(ReasonHedge) {
				hedging, cause = false, ErrBudget
				break
			}
			r.scheduled(ctx, started+1, 0, ReasonHedge, nil)
			start(started + 1)
		}
	} else {
		arm(h.delay)
	}
	for {
		select {
		case o := <-results:
			inFlight--
			if leased[o.n] {
				leased[o.n] = false
				lease.End(taken[o.n], o.err == nil)
			}
			if o.err == nil {
				if budget != nil {
					budget.OnSuccess()
				}
				// The winner is the attempt that claimed the race (callpath.Win), if any
				// did: it may not be the first to return.
				if winner = race.Winner(); winner == 0 {
					winner = o.n
				}
				_ = finish()
				return nil
			}
			if ctx.Err() != nil {
				_ = finish()
				return r.giveUp(ctx, started, ctxCause(ctx), o.err, "")
			}
			why := reasonOf(h.should, o.err)
			if why == "" {
				_ = finish()
				return r.giveUp(ctx, started, ErrNotRetryable, o.err, "")
			}
			if budget != nil {
				budget.OnFailure()
			}
			last = o.err
			if hint, ok := fault.Hint(o.err); ok && hedging {
				if hint > h.maxHint {
					hedging, cause = false, ErrHintTooLong
				} else {
					arm(hint) // the server asked for a pause: the next attempt waits for it
				}
			} else if hedging {
				if more(why) {
					r.scheduled(ctx, started+1, 0, why, o.err)
					start(started + 1)
					if h.delay > 0 {
						arm(h.delay)
					}
				} else {
					hedging = false
					if started < h.max {
						cause = ErrBudget
					}
				}
			}
			if inFlight == 0 && (!hedging || wake == nil || started >= h.max) {
				// Nothing in flight and nothing to wait for (a pushback's pause is waited out).
				suppressed := ""
				if cause == ErrBudget {
					suppressed = event.SuppressedBudget
				} else if cause == ErrHintTooLong {
					suppressed = event.SuppressedHint
				}
				return r.giveUp(ctx, started, cause, last, suppressed)
			}
		case <-wake:
			wake = nil
			if hedging && more(ReasonHedge) {
				r.scheduled(ctx, started+1, h.delay, ReasonHedge, nil)
				start(started + 1)
				if started < h.max {
					arm(h.delay)
				}
			} else if hedging {
				hedging = false
				if started < h.max {
					cause = ErrBudget
				}
			}
		case <-ctx.Done():
			if err := finish(); err != nil {
				last = err
			}
			return r.giveUp(ctx, started, ctxCause(ctx), last, "")
		}
	}
}

// panicked turns a panic recovered in attempt n into the attempt's error and reports it.
func (r *hedger) panicked(ctx context.Context, n int, v any) error {
	pe := policy.NewPanicError(v)
	if event.NeedsOf(r.obs, event.Panic) != event.NeedsNothing {
		r.obs.Observe(event.Event{Kind: event.Panic, Pipeline: r.pipeline, Source: HedgePanicSource, Time: r.clock.Now(),
			Attempt: n, Err: pe, Context: ctx})
	}
	return pe
}
