package policy

import (
	"context"
	"time"

	"github.com/backstop-go/backstop/event"
)

// Func is the work a pipeline protects: one call to a dependency. It must honour ctx.
type Func func(ctx context.Context) error

// A Runner runs fn under the policies bound below it.
//
// Implementations must be safe for concurrent use: one bound Runner serves every call
// of its pipeline.
type Runner interface {
	Run(ctx context.Context, fn Func) error
}

// RunnerFunc adapts a function to a [Runner].
type RunnerFunc func(ctx context.Context, fn Func) error

// Run calls f(ctx, fn).
func (f RunnerFunc) Run(ctx context.Context, fn Func) error { return f(ctx, fn) }

// A Policy is one stage of a [Pipeline].
//
// Implementers:
//   - Placement returns the same value on every call; [Wrap] checks the ordering
//     rules on it. A built-in stage declares its placement as a third party does.
//   - Bind is called once per pipeline, innermost stage first, with the Runner below
//     the stage. It returns the Runner that does the stage's per-call work. Bind
//     must not run fn. A stage with nothing to do per call returns next itself.
//   - A policy object may be bound into several pipelines. Its state (a breaker's
//     counts, a budget's tokens) is then shared by all of them.
//   - Run must be safe for concurrent use and honour ctx: it never waits past the
//     end of ctx, and returns promptly once ctx is done.
//   - Run returns fn's error, wrapped or not, unless the policy refused the call.
//     A refusal matches [ErrRejected]; use [RejectError].
//   - A stage that derives a context for the stages below must not cancel it when
//     Run returns: see the Releaser rule in the package documentation.
type Policy interface {
	Placement() Placement
	Bind(next Runner, env Env) Runner
}

// Placement is what a stage declares about itself: its kind, and where it may
// stand. [Wrap] checks the ordering rules O1–O7 on placements alone. So a
// third-party stage is checked as a built-in one is. The zero Placement (with a
// Kind) is placed like a breaker: anywhere inside a shedder and a fallback.
type Placement struct {
	// Kind names the stage in events, metrics and errors: "breaker", "retry".
	// It is snake_case, and required.
	Kind string
	// OwnsRetries marks the retry: one per pipeline (O2).
	OwnsRetries bool
	// Deadline marks the overall deadline: one per pipeline, outside the retry (O1).
	Deadline bool
	// Retry is where the stage stands relative to the retry (O3, O4).
	Retry Side
	// Outermost stages stand before every other stage, and the pipeline holds no
	// retry (O5). A shedder is one.
	Outermost bool
	// Encloses marks a stage that answers the failures of the stages inside it. It
	// stands outside every stage but outermost and free ones (O7). A fallback is one.
	Encloses bool
	// Free stages stand anywhere, even outside outermost and enclosing ones.
	Free bool
	// Once allows at most one stage of this kind in a pipeline (O6).
	Once bool
	// Prompt says the stage never waits before it calls the stage below: no queue,
	// no token wait. See [Env.AttemptTimeout].
	Prompt bool
}

// Side says where a stage stands relative to the pipeline's retry.
type Side uint8

// The sides of a retry.
const (
	RetryAnywhere Side = iota // either side, or no retry at all
	// OutsideRetry stages stand outside the retry when there is one. One that
	// implements [RetryBudget] is the retry's budget: it needs a retry (O4).
	OutsideRetry
	// InsideRetry stages need a retry, and stand inside it (O3): a per-attempt timeout.
	InsideRetry
)

// Env is what [Wrap] tells a stage about the pipeline it is bound into. Its zero value
// is valid: an unnamed pipeline with no observer and no budget.
type Env struct {
	// Pipeline is the pipeline's name, set with [Name]; "" if unnamed.
	Pipeline string
	// Observer receives the stage's events. Nil means nobody listens; a stage must
	// then do no event work at all.
	Observer event.Observer
	// Budget is, for the retry, the budget standing outside it; nil if none.
	Budget RetryBudget
	// Position is the stage's 1-based position in the pipeline, outermost first.
	Position int
	// AttemptTimeout is, for the retry, the limit of the per-attempt timeout inside
	// it. That is an [InsideRetry] stage with a Limit() time.Duration method, as
	// deadline.NewPerAttempt has. It is 0 if none. A retry uses it to avoid starting
	// an attempt that cannot finish before the deadline.
	//
	// For the overall deadline, it is that limit when only [Placement.Prompt] stages
	// stand between the two; else 0. A call that makes one attempt then ends within
	// that limit. So a longer overall deadline could never fire first.
	AttemptTimeout time.Duration
}

// RetryBudget is the contract between a budget (an [OutsideRetry] stage) and the
// retry inside it. The retry gets it in [Env.Budget] when the pipeline is built.
//
// Implementers: every method is called on the hot path of a call. Each must be safe
// for concurrent use and should not allocate. The retry calls, for each call:
//   - Deposit once, before the first attempt;
//   - OnFailure after each attempt that failed with an error the retry would retry;
//   - Withdraw before each retry (never before the first attempt); false refuses it;
//   - OnSuccess once, when the call succeeded.
type RetryBudget interface {
	Deposit()
	Withdraw() bool
	OnSuccess()
	OnFailure()
}

// RetryLease is what a [RetryBudget] may implement beyond it. With it, a budget
// prices each retry by why it is made, and hears when the retry is over. The AWS
// SDKs' retry quota needs both: a timeout costs more, and a retry that succeeds is
// refunded. So does a cap on retries in flight (Envoy's max_retries). A retry inside
// a budget that implements it calls, instead of Withdraw:
//   - Take before each retry, with why the last error was retryable. That is one of
//     the retry package's Reason… values: "timeout", "network", "hint", "throttle",
//     "retryable", "custom". False refuses the retry. Taken is what the budget
//     took; it is handed back to End.
//   - End exactly once for every Take that allowed a retry. It is called when that
//     retry's attempt has ended (ok: it succeeded). It is also called when the call
//     ended before the retry was made (ok false).
//
// Deposit, OnFailure and OnSuccess are called as for any RetryBudget. The same
// rules hold: safe for concurrent use, no allocation.
type RetryLease interface {
	RetryBudget
	Take(reason string) (taken int64, ok bool)
	End(taken int64, ok bool)
}

// Gauge is one value a stage publishes about its state, read at every scrape.
type Gauge struct {
	// Name is snake_case and says what is measured: "inflight", "waiting", "limit".
	Name string
	// Help is one sentence for the series' help text.
	Help string
	// Value reads the gauge. It must be safe for concurrent use and cheap.
	Value func() float64
}

// A Publisher is a named stage that publishes gauges of its state. Some observers
// keep series: package metrics, package policyotel. Such an observer exports each
// gauge of each stage it is handed as backstop_stage_<Gauge.Name>{policy, name}.
// There, policy is the stage's Placement.Kind. No observer lists the stages it knows.
type Publisher interface {
	Policy
	Name() string
	Gauges() []Gauge
}
