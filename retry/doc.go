// Package retry runs a call's attempts with jittered exponential backoff, retrying only
// errors known to be transient, within the call's deadline and budget, and only where
// it owns retries on the call path.
//
// # The loop
//
// [New] returns a policy of kind Retry for policy.Wrap. For each call it makes the
// first attempt; after a failure it retries only if all of these hold:
//   - the error is retryable ([Options].ShouldRetry, by default [DefaultShouldRetry]:
//     errors marked with fault.Retryable or fault.After, timeouts, refused or reset connections);
//   - attempts remain (MaxAttempts counts the first one);
//   - no other layer owns retries on the call path (callpath.Owned): otherwise the call
//     makes one attempt and reports retry_suppressed{why="owner"};
//   - a server's hint, if any, is no longer than MaxHintDelay: otherwise the call
//     returns at once with retry_suppressed{why="hint"}, since coming back before the
//     server asked would only be refused again;
//   - the delay, plus the least time an attempt needs (MinAttemptTime, by default the
//     per-attempt timeout inside the retry), ends before the context's deadline:
//     otherwise the call returns at once with retry_suppressed{why="deadline"} rather
//     than sleep, or start an attempt, in vain;
//   - the budget outside the retry, if any, allows it: otherwise retry_suppressed{why="budget"}.
//
// The delay before retry n is max(Strategy.Delay(n), hint + up to 50 % of hint), where
// the hint is a server's Retry-After carried by fault.After. Every delay a strategy returns
// lies in [0, Cap]; sums saturate rather than overflow.
//
// # Who owns the call path
//
// A retry marks each attempt's context as owned (callpath.WithAttempt), so retrying
// pipelines called underneath make one attempt each. A retry with MaxAttempts 1 can
// never retry and does not claim the call path. Only the owning retry talks to its
// budget: a suppressed retry below neither deposits nor pays, so a budget shared by
// nested pipelines is charged once per failed attempt.
//
// # Errors
//
// A call that gave up returns an [*Error] whose Cause says why (ErrExhausted,
// ErrDeadline, ErrBudget, ErrNotRetryable, ErrOwner, ErrHintTooLong, ErrCanceled) and
// which unwraps to the last attempt's error. A give-up for the caller's cancellation
// also matches context.Canceled, and one for the deadline matches
// context.DeadlineExceeded (and, under an overall deadline of package deadline,
// deadline.ErrExceeded), so policy.Outcome reports "canceled" and "deadline".
//
// On purpose, an *Error never matches policy.ErrRejected, even when a budget or the
// owner rule stopped it: it carries the failure underneath, which the retry owning
// the call path above may still classify and retry. Refusals by stages on the call
// path — an open breaker, a shed — are rejections and are never retried.
//
// # Default schedule
//
// 3 attempts, [Full] jitter, base 100 ms, cap 5 s:
//
//	attempt   1     2                  3
//	waits     —     [0, 100ms) before  [0, 200ms) before
//
// Each strategy's doc has its own table: [Full], [Equal], [Decorrelated], [None], [GRPC].
//
// # Retry-After
//
// [ParseRetryAfter] reads both forms of RFC 9110's Retry-After; package policyhttp
// turns a 429 or 503 with one into an error marked with fault.After.
//
// # Hedging
//
// [NewHedge] is the other way to own a call path: instead of waiting for an attempt
// to fail, it starts another when one is slow to answer (gRFC A6's hedgingPolicy),
// up to MaxAttempts in flight, and keeps the first success. It is a retry for the
// ordering rules (one per pipeline, a budget outside pays for every extra attempt, a
// per-attempt timeout inside) and for the owner rule. Its attempts run concurrently:
// work whose result outlives the call keeps it only if callpath.Win says its attempt
// won; the hedge leaves the winner's context alive and cancels the others'. Work
// marked callpath.WithoutRepeats (policyhttp marks requests that are not idempotent)
// gets one attempt.
package retry

// Kind is the retry's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "retry"
