package policy

import (
	"context"
	"fmt"
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
//   - Kind returns a constant; [Wrap] checks the ordering rules on it. Third-party
//     policies return [KindOther] and may stand anywhere.
//   - Bind is called once per pipeline (and again by [Pipeline.With]), innermost stage
//     first, with the Runner below the stage. It returns the Runner that does the stage's
//     per-call work. Bind must not run fn; per-call work happens in Run, never in Bind.
//     A stage with nothing to do per call returns next itself.
//   - A policy object may be bound into several pipelines; state it keeps (a breaker's
//     counts, a budget's tokens) is then shared by all of them.
//   - Run must be safe for concurrent use and honour ctx: it never waits (sleeps,
//     queues) past the end of ctx, and returns promptly once ctx is done.
//   - Run returns fn's error (possibly wrapped, so that errors.Is still finds it) unless
//     the policy refused the call, in which case the error matches [ErrRejected].
//   - The Releaser rule: a stage that derives a context for the stages below (a
//     deadline's context.WithTimeout) must not cancel it when Run returns. It hands the
//     cancel function to callpath.DeferRelease, which runs it at once unless the caller's ctx
//     carries a callpath.Releaser; then it runs when the caller releases, because the result
//     of the call is read after Run returns (an HTTP response body).
type Policy interface {
	Kind() Kind
	Bind(next Runner, env Env) Runner
}

// Kind says what a [Policy] is, for the ordering rules of [Wrap].
type Kind uint8

// The kinds of policy. The zero Kind is [KindOther].
const (
	KindOther          Kind = iota // a third-party policy: no ordering rule applies
	KindDeadline                   // an overall deadline (deadline.New)
	KindBreaker                    // a circuit breaker
	KindBudget                     // a retry budget; must implement [RetryBudget]
	KindRetry                      // a retry loop
	KindAttemptTimeout             // a per-attempt timeout (deadline.PerAttempt)
	KindShed                       // a load shedder
	KindThrottle                   // client-side adaptive throttling: placed like a breaker
	KindFallback                   // a fallback: outside every stage whose failures it answers (O7)
	KindBulkhead                   // a client-side bulkhead (a cap on concurrent calls): placed like a breaker
	KindRateLimit                  // a client-side rate limiter: placed like a breaker
)

// KindLast is the last Kind defined; tools that check a Kind is one of the constants
// compare against it.
const KindLast = KindRateLimit

var kindNames = [...]string{
	KindOther:          "other",
	KindDeadline:       "deadline",
	KindBreaker:        "breaker",
	KindBudget:         "budget",
	KindRetry:          "retry",
	KindAttemptTimeout: "attempt-timeout",
	KindShed:           "shed",
	KindThrottle:       "throttle",
	KindFallback:       "fallback",
	KindBulkhead:       "bulkhead",
	KindRateLimit:      "rate-limit",
}

// String returns the kind's name as used in error messages: "deadline", "retry", …
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Env is what [Wrap] tells a stage about the pipeline it is bound into. Its zero value
// is valid: an unnamed pipeline with no observer and no budget.
type Env struct {
	// Pipeline is the pipeline's name, set with [Name]; "" if unnamed.
	Pipeline string
	// Observer receives the stage's events; nil means nobody listens, and a stage must
	// then do no event work at all.
	Observer event.Observer
	// Budget is, for a stage of [KindRetry], the budget standing outside it; nil if none.
	Budget RetryBudget
	// Position is the stage's 1-based position in the pipeline, outermost first.
	Position int
	// AttemptTimeout is, for a stage of [KindRetry], the limit of the per-attempt
	// timeout standing inside it (a [KindAttemptTimeout] policy with a
	// Limit() time.Duration method, as deadline.PerAttempt has); 0 if none. A retry
	// uses it to avoid starting an attempt that cannot finish before the deadline.
	//
	// For a stage of [KindDeadline] it is the limit of the per-attempt timeout inside
	// it when only breakers, budgets, throttles and retries stand between the two; 0
	// otherwise. None of those waits outside an attempt when the call makes one
	// attempt, as a retry does under an owner elsewhere on the call path: each such
	// call then ends within that limit, and an overall deadline longer than it could
	// never fire first.
	AttemptTimeout time.Duration
}

// RetryBudget is the contract between a budget (a [Policy] of [KindBudget]) and the
// retry standing inside it, handed to the retry in [Env.Budget] when the pipeline is built.
//
// Implementers: every method is called on the hot path of a call, must be safe for
// concurrent use and should not allocate. The retry calls, for each call:
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

// RetryLease is what a [RetryBudget] implements, beyond it, to price each retry by
// why it is made and to hear when it is over: the AWS SDKs' retry quota (a timeout
// costs more, a retry that succeeds is refunded) and a cap on retries in flight
// (Envoy's max_retries) need both. A retry standing inside a budget that implements
// it calls, instead of Withdraw:
//   - Take before each retry, with why the last error was retryable (the retry
//     package's Reason…: "timeout", "network", "hint", "throttle", "retryable",
//     "custom"); false
//     refuses the retry; taken is what the budget took, handed back to End;
//   - End exactly once for every Take that allowed a retry, when that retry's attempt
//     has ended (ok: it succeeded) or the call ended before it was made (ok false).
//
// Deposit, OnFailure and OnSuccess are called as for any RetryBudget. The same rules
// hold: safe for concurrent use, no allocation.
type RetryLease interface {
	RetryBudget
	Take(reason string) (taken int64, ok bool)
	End(taken int64, ok bool)
}
