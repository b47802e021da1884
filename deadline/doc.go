// Package deadline bounds the time a call may take.
//
// # Two limits
//
// [New] is the overall deadline of a call: one context.WithTimeout per call, which
// bounds every attempt and every backoff sleep of a retry inside it. [NewPerAttempt] is
// the timeout of one attempt and stands inside the retry. The ordering rules of package
// policy keep each in its place (O1, O3):
//
//	p, err := policy.Wrap(overall, breaker, retry, perAttempt)
//
// The overall deadline sets no timer when it could never fire first: under a caller
// whose deadline is sooner, and for a call that makes one attempt (a retry owner
// elsewhere on the call path, [policy.Env.AttemptTimeout]) under a shorter per-attempt
// timeout with only breakers, budgets, throttles and retries between the two — a
// service in the middle of a call graph. Its errors are the same.
//
// # Errors
//
// A call that ran out of time returns an [*Error] that matches context.DeadlineExceeded
// and [ErrExceeded] (or [ErrAttemptTimeout]); the caller's own cancellation or
// deadline is passed through untouched, so the two can be told apart:
//
//	switch {
//	case errors.Is(err, deadline.ErrExceeded): // our limit ran out
//	case errors.Is(err, context.Canceled):     // the caller gave up
//	}
package deadline

// The kinds of a deadline's Placement: its events' Stage and Source.
const (
	Kind        = "deadline"        // an overall deadline
	KindAttempt = "attempt_timeout" // a per-attempt timeout ([NewPerAttempt])
)
