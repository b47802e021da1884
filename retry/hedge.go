package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero HedgeOptions fields. They are Polly's: v8
// HedgingStrategyOptions makes one hedged attempt after 2 s.
const (
	DefaultHedgeMaxAttempts = 2
	DefaultHedgeDelay       = 2 * time.Second
	// HedgeMaxAttemptsLimit is the most HedgeOptions.MaxAttempts may be. It is
	// gRFC A6's bound on a hedging policy's maxAttempts. More in flight only add
	// load.
	HedgeMaxAttemptsLimit = 5
)

// ReasonHedge is the Reason of the retry_scheduled event that reports a hedged
// attempt.
const ReasonHedge = "hedge"

// HedgePanicSource is the Source of the event.Panic a Hedge reports.
const HedgePanicSource = "hedge"

// errHedgeGoexit is the error of a hedged attempt that called runtime.Goexit.
var errHedgeGoexit = errors.New("retry: a hedged attempt called runtime.Goexit")

// HedgeOptions configure a [Hedge]. The zero value is valid: one hedged attempt if
// the first has not answered within 2 s.
type HedgeOptions struct {
	// MaxAttempts is how many attempts a call may have in flight, the first
	// included, in [2, 5]. 0 means DefaultHedgeMaxAttempts (2).
	MaxAttempts int
	// Delay is how long an attempt may go unanswered before the next one starts
	// (gRFC A6's hedgingDelay). Set it near the dependency's p95 latency. 0 means
	// DefaultHedgeDelay (2 s). Negative means none: all attempts start at once.
	Delay time.Duration
	// ShouldRetry says whether an attempt's error is non-fatal (A6's
	// nonFatalStatusCodes). The next attempt then starts at once instead of after
	// Delay. Nil means the retry classification: fault.Retryable, timeouts, network
	// errors, hints. A fatal error ends the call at once, cancelling the other
	// attempts.
	ShouldRetry func(error) bool
	// MaxHintDelay bounds a server's pushback. A hint up to it delays the next
	// attempt by the hint: Retry-After, gRPC pushback. A longer one stops hedging.
	// 0 means DefaultMaxHintDelay.
	MaxHintDelay time.Duration
	// Clock times the delays; nil means clock.System().
	Clock clock.Clock
}

// Hedge sends another attempt when an attempt is slow to answer, without waiting
// for it to fail. After Delay with no answer, a second attempt starts. After
// another Delay, a third starts, up to MaxAttempts in flight. The first success
// wins, and the other attempts are cancelled. The call returns once they have
// returned, so nothing outlives it. A non-fatal failure starts the next attempt at
// once. A fatal one ends the call.
//
// For the ordering rules, a Hedge is a retry (policy.KindRetry). A pipeline has one
// retry or one hedge (O2). A budget outside it (O4) is asked before every extra
// attempt. A per-attempt timeout inside it (O3) bounds each attempt. It owns the
// call path as a retry does. Each attempt's context is marked with its number. A
// hedge running under another owner makes one attempt. It makes one attempt, too,
// for work that may not be repeated (callpath.WithoutRepeats). Package policyhttp
// marks so every request that is not idempotent.
//
// Attempts run on goroutines of their own, where no caller could recover a panic.
// A panic in an attempt is recovered: in fn, a stage below the hedge or its
// observer. It becomes that attempt's error, a *policy.PanicError with the panic's
// value and stack. It is reported as an event.Panic (Source HedgePanicSource). It
// is not retryable, so the call ends with it: a *Error that unwraps to it. A call
// that makes one attempt runs it on the caller's goroutine. There, a panic
// propagates unchanged.
//
// fn runs concurrently with itself, once per attempt in flight. It must keep each
// attempt's result apart. It keeps one only if callpath.Win says its attempt won
// the race. Package policyhttp keeps the winner's response and closes the others'.
// The winner's context lives on until the caller's callpath.Releaser releases it.
type Hedge struct {
	max     int
	delay   time.Duration
	maxHint time.Duration
	should  func(error) bool
	clock   clock.Clock
}

// NewHedge returns a Hedge with o's zero fields set to their defaults. Or it
// returns an error matching ErrInvalidOptions that names the bad field.
func NewHedge(o HedgeOptions) (*Hedge, error) {
	h := &Hedge{max: o.MaxAttempts, delay: o.Delay, maxHint: o.MaxHintDelay, should: o.ShouldRetry, clock: clock.Or(o.Clock)}
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

// MaxAttempts returns the most attempts a call may make, the first included.
func (h *Hedge) MaxAttempts() int { return h.max }

// Placement is a retry's: for the ordering rules a hedge is a retry.
func (h *Hedge) Placement() policy.Placement { return place }

// Bind returns the Runner that hedges each call. It uses env.Budget if the
// pipeline has a budget outside it.
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
	// A failure before the delay with a hint starts the next attempt after the
	// hint. That is up to the delay, and the longest hint after the last.
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
	if callpath.Owned(ctx) {
		return r.attempt(ctx, fn, 1) // another layer owns the call path: one attempt
	}
	if !callpath.Repeatable(ctx) {
		return r.attempt(callpath.WithAttempt(ctx, 1), fn, 1) // the owner, of work that may be done once
	}
	if r.budget != nil {
		r.budget.Deposit()
	}
	c := &hedgeCall{r: r, h: r.h, ctx: ctx, fn: fn, hedging: true, cause: ErrExhausted}
	c.results = make(chan outcome, r.h.max) // never blocks an attempt: nothing outlives the call
	c.rctx, c.race = callpath.WithRace(ctx)
	defer c.release()
	c.launch(1)
	c.begin()
	for {
		if done, err := c.wait(); done {
			return err
		}
	}
}

// A hedgeCall is one call's hedging: its attempts in flight, its timer and why it
// would give up. Only the call's goroutine changes it. Attempts read r, fn and
// results.
type hedgeCall struct {
	r   *hedger
	h   *Hedge
	ctx context.Context // the caller's
	fn  policy.Func

	rctx    context.Context // the race's, parent of every attempt's
	race    *callpath.Race
	results chan outcome

	// Each attempt has a context of its own. The losers' are cancelled. The
	// winner's lives on until the caller's Releaser says: its result may be read
	// after Run.
	cancels [HedgeMaxAttemptsLimit + 1]context.CancelFunc
	taken   [HedgeMaxAttemptsLimit + 1]int64 // what the lease took for each attempt
	leased  [HedgeMaxAttemptsLimit + 1]bool  // whether the lease has yet to hear of it
	winner  int                              // the attempt whose context lives on; 0 for none

	started, inFlight int
	timer             clock.Timer
	wake              <-chan time.Time // nil: no hedge is due

	last    error // the last non-fatal failure
	hedging bool  // false once the budget, the attempts or a hint stopped further hedges
	cause   error // why the call gives up if it runs out of attempts
}

// launch starts attempt n on a goroutine of its own.
func (c *hedgeCall) launch(n int) {
	c.started, c.inFlight = n, c.inFlight+1
	actx, cancel := context.WithCancel(c.rctx)
	c.cancels[n] = cancel
	go c.run(actx, n)
}

// run makes attempt n and sends its outcome, even if it panics or calls runtime.Goexit.
func (c *hedgeCall) run(ctx context.Context, n int) {
	err := errHedgeGoexit // replaced unless the attempt calls runtime.Goexit
	defer func() {
		if v := recover(); v != nil {
			err = c.r.panicked(ctx, n, v)
		}
		c.results <- outcome{n, err}
	}()
	err = c.r.attempt(callpath.WithAttempt(ctx, n), c.fn, n)
}

// begin starts every attempt at once if there is no delay, or arms the first hedge.
func (c *hedgeCall) begin() {
	if c.h.delay > 0 {
		c.arm(c.h.delay)
		return
	}
	// A6's hedgingDelay of 0: every attempt at once, as far as the budget allows.
	for c.started < c.h.max {
		if !c.more(ReasonHedge) {
			c.stop()
			return
		}
		c.r.scheduled(c.ctx, c.started+1, 0, ReasonHedge, nil)
		c.launch(c.started + 1)
	}
}

// more asks the budget for an extra attempt, after an error of reason why.
func (c *hedgeCall) more(why string) bool {
	if c.started >= c.h.max {
		return false
	}
	switch {
	case c.r.lease != nil:
		t, ok := c.r.lease.Take(why)
		if !ok {
			return false
		}
		c.taken[c.started+1], c.leased[c.started+1] = t, true
	case c.r.budget != nil && !c.r.budget.Withdraw():
		return false
	}
	return true
}

// stop ends hedging; the budget is the cause if attempts remained.
func (c *hedgeCall) stop() {
	c.hedging = false
	if c.started < c.h.max {
		c.cause = ErrBudget
	}
}

// arm sets the timer to wake the call after d, replacing any earlier one.
func (c *hedgeCall) arm(d time.Duration) {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer = c.h.clock.NewTimer(d)
	c.wake = c.timer.C()
}

// wait handles the next outcome, timer or cancellation; done says the call is over.
func (c *hedgeCall) wait() (done bool, err error) {
	select {
	case o := <-c.results:
		return c.settle(o)
	case <-c.wake:
		c.hedge()
		return false, nil
	case <-c.ctx.Done():
		if last := c.finish(); last != nil {
			c.last = last
		}
		return true, c.r.giveUp(c.ctx, c.started, ctxCause(c.ctx), c.last, "")
	}
}

// settle takes an attempt's outcome; done says the call is over.
func (c *hedgeCall) settle(o outcome) (done bool, err error) {
	c.inFlight--
	if c.leased[o.n] {
		c.leased[o.n] = false
		c.r.lease.End(c.taken[o.n], o.err == nil)
	}
	if o.err == nil {
		c.win(o.n)
		return true, nil
	}
	if c.ctx.Err() != nil {
		_ = c.finish()
		return true, c.r.giveUp(c.ctx, c.started, ctxCause(c.ctx), o.err, "")
	}
	why := reasonOf(c.h.should, o.err)
	if why == "" {
		_ = c.finish()
		return true, c.r.giveUp(c.ctx, c.started, ErrNotRetryable, o.err, "")
	}
	if c.r.budget != nil {
		c.r.budget.OnFailure()
	}
	c.last = o.err
	c.failed(o.err, why)
	if c.inFlight == 0 && (!c.hedging || c.wake == nil || c.started >= c.h.max) {
		// Nothing in flight and nothing to wait for (a pushback's pause is waited out).
		return true, c.r.giveUp(c.ctx, c.started, c.cause, c.last, suppressedBy(c.cause))
	}
	return false, nil
}

// win ends the call on attempt n's success.
func (c *hedgeCall) win(n int) {
	if c.r.budget != nil {
		c.r.budget.OnSuccess()
	}
	// The winner is the attempt that claimed the race (callpath.Win), if any did.
	// It may not be the first to return.
	if c.winner = c.race.Winner(); c.winner == 0 {
		c.winner = n
	}
	_ = c.finish()
}

// failed hedges after a non-fatal err of reason why. It does so at once, or after
// the server's hint.
func (c *hedgeCall) failed(err error, why string) {
	hint, ok := fault.Hint(err)
	switch {
	case !c.hedging:
	case ok && hint > c.h.maxHint:
		c.hedging, c.cause = false, ErrHintTooLong
	case ok:
		c.arm(hint) // the server asked for a pause: the next attempt waits for it
	case c.more(why):
		c.r.scheduled(c.ctx, c.started+1, 0, why, err)
		c.launch(c.started + 1)
		if c.h.delay > 0 {
			c.arm(c.h.delay)
		}
	default:
		c.stop()
	}
}

// hedge starts the next attempt when the timer fires, if hedging and the budget allow.
func (c *hedgeCall) hedge() {
	c.wake = nil
	if !c.hedging {
		return
	}
	if !c.more(ReasonHedge) {
		c.stop()
		return
	}
	c.r.scheduled(c.ctx, c.started+1, c.h.delay, ReasonHedge, nil)
	c.launch(c.started + 1)
	if c.started < c.h.max {
		c.arm(c.h.delay)
	}
}

// finish cancels the attempts still in flight, waits for them, and returns the
// last one's error.
func (c *hedgeCall) finish() (err error) {
	if c.winner == 0 {
		// An attempt that claimed the race keeps its result, and so its context. It
		// does so even if the call ends on another attempt's error.
		c.winner = c.race.Winner()
	}
	for n, cancel := range c.cancels {
		if cancel != nil && n != c.winner {
			cancel()
		}
	}
	for ; c.inFlight > 0; c.inFlight-- {
		o := <-c.results
		if c.leased[o.n] {
			c.r.lease.End(c.taken[o.n], false)
		}
		err = o.err
	}
	return err
}

// release stops the timer, and cancels every attempt's context but the winner's.
// It leaves the winner's to the caller's Releaser.
func (c *hedgeCall) release() {
	if c.timer != nil {
		c.timer.Stop()
	}
	for n, cancel := range c.cancels {
		switch {
		case cancel == nil:
		case n == c.winner:
			callpath.DeferRelease(c.ctx, cancel)
		default:
			cancel()
		}
	}
}

// suppressedBy names the retry_suppressed reason for a give-up's cause, or "".
func suppressedBy(cause error) string {
	switch cause {
	case ErrBudget:
		return event.SuppressedBudget
	case ErrHintTooLong:
		return event.SuppressedHint
	}
	return ""
}

// panicked turns a panic recovered in attempt n into the attempt's error and reports it.
func (r *hedger) panicked(ctx context.Context, n int, v any) error {
	pe := policy.NewPanicError(v)
	if event.NeedsOf(r.obs, event.Panic) != event.NeedsNothing {
		r.obs.Observe(event.Event{Kind: event.Panic, Pipeline: r.pipeline, Stage: Kind, Source: HedgePanicSource, Time: r.clock.Now(),
			Attempt: n, Err: pe, Context: ctx})
	}
	return pe
}
