// Package deadline bounds the time a call may take.
//
// # Two limits
//
// [New] is the overall deadline of a call: one context.WithTimeout per call, which
// bounds every attempt and every backoff sleep of a retry inside it. [PerAttempt] is
// the timeout of one attempt and stands inside the retry. The ordering rules of package
// policy keep each in its place (O1, O3):
//
//	p, err := policy.Wrap(overall, breaker, retry, perAttempt)
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
