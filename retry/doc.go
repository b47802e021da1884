// Package retry runs a call's attempts with jittered exponential backoff, retrying only
// errors known to be transient, within the call's deadline and budget, and only where
// it owns retries on the call path.
//
// # The loop
//
// [New] returns a policy of kind Retry for policy.Wrap. For each call it makes the
// first attempt; after a failure it retries only if all of these hold:
//   - the error is retryable ([Options].ShouldRetry, by default [DefaultShouldRetry]:
//     errors marked with [Retryable] or [After], timeouts, refused or reset connections);
//   - attempts remain (MaxAttempts counts the first one);
//   - no other layer owns retries on the call path (policy.Owned): otherwise the call
//     makes one attempt and reports retry_suppressed{why="owner"};
//   - the budget outside the retry, if any, allows it: otherwise retry_suppressed{why="budget"};
//   - the delay would end before the context's deadline: otherwise the call returns at
//     once with retry_suppressed{why="deadline"} rather than sleep in vain.
//
// The delay before retry n is max(Strategy.Delay(n), hint + up to 50 % of hint), where
// the hint is a server's Retry-After carried by [After] (capped at MaxHintDelay).
//
// A call that gave up returns an [*Error] whose Cause says why (ErrExhausted,
// ErrDeadline, ErrBudget, ErrNotRetryable, ErrOwner, ErrCanceled) and which unwraps to
// the last attempt's error.
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
// turns a 429 or 503 with one into an error marked with [After].
package retry
