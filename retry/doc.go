// Package retry runs a call's attempts with jittered exponential backoff. It
// retries only errors known to be transient. It stays within the call's deadline
// and budget. It retries only where it owns retries on the call path.
//
// # The loop
//
// [New] returns a policy of kind Retry for policy.Wrap. For each call it makes the
// first attempt. After a failure, it retries only if all of these hold:
//   - the error is retryable. [Options].ShouldRetry decides; by default
//     [DefaultShouldRetry] does. It accepts errors marked with fault.Retryable or
//     fault.After, timeouts, and refused or reset connections;
//   - attempts remain (MaxAttempts counts the first one);
//   - no other layer owns retries on the call path (callpath.Owned). Otherwise the
//     call makes one attempt and reports retry_suppressed{why="owner"};
//   - a server's hint, if any, is no longer than MaxHintDelay. Otherwise the call
//     returns at once with retry_suppressed{why="hint"}. Coming back before the
//     server asked would only be refused again;
//   - the delay ends before the context's deadline, with room for the least time
//     an attempt needs. That is MinAttemptTime, by default the per-attempt timeout
//     inside the retry. Otherwise the call returns at once with
//     retry_suppressed{why="deadline"}. It does not sleep, or start an attempt, in
//     vain;
//   - the budget outside the retry, if any, allows it. Otherwise it reports
//     retry_suppressed{why="budget"}.
//
// The delay before retry n is max(Strategy.Delay(n), hint + up to 50 % of hint).
// The hint is a server's Retry-After, carried by fault.After. Every delay a
// strategy returns lies in [0, Cap]. Sums saturate rather than overflow.
//
// # Who owns the call path
//
// A retry marks each attempt's context as owned (callpath.WithAttempt). Thus
// retrying pipelines called underneath make one attempt each. A retry with
// MaxAttempts 1 can never retry, and does not claim the call path. Only the owning
// retry talks to its budget. A suppressed retry below neither deposits nor pays. So
// a budget shared by nested pipelines is charged once per failed attempt.
//
// # Errors
//
// A call that gave up returns an [*Error]. Its Cause says why: ErrExhausted,
// ErrDeadline, ErrBudget, ErrNotRetryable, ErrOwner, ErrHintTooLong, ErrCanceled.
// It unwraps to the last attempt's error. A give-up for the caller's cancellation
// also matches context.Canceled. One for the deadline matches
// context.DeadlineExceeded. Under an overall deadline of package deadline, it also
// matches deadline.ErrExceeded. So policy.Outcome reports "canceled" and
// "deadline".
//
// On purpose, an *Error never matches policy.ErrRejected. That holds even when a
// budget or the owner rule stopped it. It carries the failure underneath. The retry
// owning the call path above may still classify and retry it. Refusals by stages on
// the call path are rejections, and are never retried: an open breaker, a shed.
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
// [callpath.ParseRetryAfter] reads both forms of RFC 9110's Retry-After. Package
// policyhttp turns a 429 or 503 with one into an error marked with fault.After. The
// retry waits that hint; one longer than Options.MaxHintDelay ends the call.
//
// # Hedging
//
// [NewHedge] is the other way to own a call path. It does not wait for an attempt
// to fail. It starts another when one is slow to answer (gRFC A6's
// hedgingPolicy), up to MaxAttempts in flight. It keeps the first success. It is a
// retry for the ordering rules and for the owner rule. So it stands once per
// pipeline, with a per-attempt timeout inside. A budget outside pays for every
// extra attempt. Its attempts run concurrently. Work whose result outlives the call
// keeps it only if callpath.Win says its attempt won. The hedge leaves the winner's
// context alive, and cancels the others'. Work marked callpath.WithoutRepeats gets
// one attempt. Package policyhttp marks so the requests that are not idempotent.
//
// The hedge follows gRFC A6's hedgingPolicy. Polly's hedging and Envoy's
// hedge_on_per_try_timeout do the same. Its defaults are Polly's.
package retry

// Kind is the retry's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "retry"
