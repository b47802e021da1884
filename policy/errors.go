package policy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrOrder is matched by every error [Wrap] returns for a stack that breaks an
	// ordering rule (see the package documentation).
	ErrOrder = errors.New("policy: invalid order")

	// ErrRejected is matched by every refusal by a policy that stands on the call path:
	// a breaker open, a request shed, an adaptive throttle. A rejected call is never
	// retried.
	//
	// A retry that stops early — its budget exhausted, suppressed by the owner rule, out
	// of time — is not a rejection: it returns the failure it saw (a *retry.Error that
	// unwraps to the last attempt's error), so that the retry owning the call path
	// above it can still classify that failure and retry it.
	ErrRejected = errors.New("policy: rejected")
)

// A Rejection is a refusal by a policy that stands on the call path — a breaker open,
// work shed, a throttle refusing locally — and says when to come back. Every refusal
// of Backstop's stages implements it and matches [ErrRejected]; find it with errors.As,
// whatever wrapping the caller adds:
//
//	var rej policy.Rejection
//	if errors.As(err, &rej) {
//		// answer 503 with Retry-After: rej.RetryAfter(), rounded up to whole seconds
//	}
//
// Implementers (a third-party policy that refuses work):
//   - Is(ErrRejected) reports true, so no retry retries the refusal;
//   - RetryAfter is how long from now the policy expects to admit work again, ≥ 0; 0
//     when it cannot tell (come back soon, with backoff);
//   - Reason names why, from a small closed set of the policy's own (it may become a
//     metrics label): "open", "half-open", "forced", "slow-start", "limit", "queue", "cpu", "throttled", …;
//   - the value may be shared by many refusals: callers treat it as read-only.
type Rejection interface {
	error
	RetryAfter() time.Duration
	Reason() string
}

// OrderError is the error [Wrap] returns for a stack that breaks an ordering rule. It
// matches [ErrOrder].
type OrderError struct {
	Rule  string // "O1" … "O6"
	First int    // 1-based position of the first offending stage
	// Second is the 1-based position of the other offending stage, or 0 where the rule
	// concerns one stage only (an attempt timeout with no retry).
	Second int
	Msg    string // the whole explanation, fix included
}

func (e *OrderError) Error() string { return "policy: " + e.Rule + ": " + e.Msg }

// Is reports whether target is [ErrOrder].
func (e *OrderError) Is(target error) bool { return target == ErrOrder }

func orderErr(rule string, first, second int, format string, args ...any) *OrderError {
	return &OrderError{Rule: rule, First: first, Second: second, Msg: fmt.Sprintf(format, args...)}
}

// Outcome names how a call or attempt ended, for metrics labels and logs: "success",
// "rejected" (err matches [ErrRejected]), "canceled" (context.Canceled), "deadline"
// (context.DeadlineExceeded) or "failure". The set is closed, so it is safe as a label.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeSuccess
	case errors.Is(err, ErrRejected):
		return OutcomeRejected
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDeadline
	default:
		return OutcomeFailure
	}
}

// The values [Outcome] returns.
const (
	OutcomeSuccess  = "success"
	OutcomeRejected = "rejected"
	OutcomeCanceled = "canceled"
	OutcomeDeadline = "deadline"
	OutcomeFailure  = "failure"
)
