package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrOrder is matched by every error [Wrap] returns for a stack that breaks an
	// ordering rule (see the package documentation).
	ErrOrder = errors.New("policy: invalid order")

	// ErrRejected is matched by every refusal by a policy on the call path: a
	// breaker open, a request shed, an adaptive throttle. A rejected call is never
	// retried.
	//
	// A retry that stops early is not a rejection. It may have exhausted its budget,
	// been suppressed by the owner rule, or run out of time. It returns the failure
	// it saw: a *retry.Error that unwraps to the last attempt's error. So the retry
	// owning the call path above it can still classify that failure and retry it.
	ErrRejected = errors.New("policy: rejected")
)

// RejectError is every refusal by a stage on the call path. The stage may be a
// breaker open, work shed, a queue full, no token left, or a throttle refusing. It
// matches [ErrRejected]. When Err is set, it matches the stage's own sentinel too
// (breaker.ErrOpen). Find it with errors.As, whatever wrapping the caller adds:
//
//	var rej *policy.RejectError
//	if errors.As(err, &rej) {
//		// answer 503 with Retry-After: rej.RetryAfter, rounded up to whole seconds
//	}
//
// A third-party stage that refuses work returns one too. A RejectError may be
// shared by many refusals: treat it as read-only.
type RejectError struct {
	// Policy is the refusing stage's Placement.Kind: "breaker", "shed".
	Policy string
	// Name is the stage's own name; "" if it has none.
	Name string
	// Reason says why, in snake_case from the stage's small closed set: "open",
	// "half_open", "limit", "queue", "cpu", "no_token". It may become a label.
	Reason string
	// RetryAfter is how long from the refusal until the stage expects to admit work
	// again. It is 0 when the stage cannot tell: come back soon, with backoff.
	RetryAfter time.Duration
	// Err is the stage's own sentinel, if any (breaker.ErrOpen). The refusal
	// unwraps to it, so errors.Is matches it too.
	Err error
}

// Error reads "breaker db: rejected (open); retry after 1.2s".
func (e *RejectError) Error() string {
	var b strings.Builder
	b.WriteString(e.Policy)
	if e.Name != "" {
		b.WriteString(" ")
		b.WriteString(e.Name)
	}
	b.WriteString(": rejected")
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	}
	if e.RetryAfter > 0 {
		b.WriteString("; retry after " + e.RetryAfter.String())
	}
	return b.String()
}

// Is reports whether target is [ErrRejected].
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// Unwrap returns the stage's own sentinel, or nil.
func (e *RejectError) Unwrap() error { return e.Err }

// OrderError is the error [Wrap] returns for a stack that breaks an ordering rule. It
// matches [ErrOrder].
type OrderError struct {
	Rule  string // "O1" … "O7"
	First int    // 1-based position of the first offending stage
	// Second is the 1-based position of the other offending stage. It is 0 where
	// the rule concerns one stage only (an attempt timeout with no retry).
	Second int
	Msg    string // the whole explanation, fix included
}

func (e *OrderError) Error() string { return "policy: " + e.Rule + ": " + e.Msg }

// Is reports whether target is [ErrOrder].
func (e *OrderError) Is(target error) bool { return target == ErrOrder }

func orderErr(rule string, first, second int, format string, args ...any) *OrderError {
	return &OrderError{Rule: rule, First: first, Second: second, Msg: fmt.Sprintf(format, args...)}
}

// Outcome names how a call or attempt ended, for metrics labels and logs. It is
// one of:
//   - "success";
//   - "rejected": err matches [ErrRejected];
//   - "canceled": context.Canceled;
//   - "deadline": context.DeadlineExceeded;
//   - "failure".
//
// The set is closed, so it is safe as a label.
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

// Must returns v, or panics with err. It is for stages and pipelines fixed in the
// source and built at start-up:
//
//	r := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
