// Package deadline bounds the time a call may take.
//
// # Two limits
//
// [New] is the overall deadline of a call: one context.WithTimeout per call. It
// bounds every attempt and every backoff sleep of a retry inside it.
// [NewPerAttempt] is the timeout of one attempt, and stands inside the retry. The
// ordering rules of package policy keep each in its place (O1, O3):
//
//	p, err := policy.Wrap(overall, breaker, retry, perAttempt)
//
// The overall deadline sets no timer when it could never fire first. That is so
// under a caller whose deadline is sooner. It is so too for a call that makes one
// attempt under a shorter per-attempt timeout ([policy.Env.AttemptTimeout]). Such
// a call has a retry owner elsewhere on the call path. Only breakers, budgets,
// throttles and retries may stand between the two. A service in the middle of a
// call graph is such a case. Its errors are the same.
//
// # Errors
//
// A call that ran out of time returns an [*Error]. It matches
// context.DeadlineExceeded and [ErrExceeded] (or [ErrAttemptTimeout]). The
// caller's own cancellation or deadline is passed through untouched. So the two
// can be told apart:
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
