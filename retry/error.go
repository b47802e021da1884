package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-go/backstop/fault"
)

// Why a retry gave up: the Cause of an [*Error], matched with errors.Is.
var (
	ErrExhausted    = errors.New("retry: attempts exhausted")
	ErrDeadline     = errors.New("retry: the next attempt would start past the deadline")
	ErrBudget       = errors.New("retry: budget exhausted")
	ErrNotRetryable = errors.New("retry: error not retryable")
	ErrOwner        = errors.New("retry: another layer owns retries on this call path")
	ErrCanceled     = errors.New("retry: context done")
	ErrHintTooLong  = errors.New("retry: the server asked to wait longer than MaxHintDelay")

	// ErrInvalidOptions is matched by New's errors for bad Options.
	ErrInvalidOptions = errors.New("retry: invalid options")
)

// Error is returned by a retry that gave up. Its last attempt failed, and the call
// was not retried further. Attempts counts the attempts made. Cause is one of
// ErrExhausted, ErrDeadline, ErrBudget, ErrNotRetryable, ErrOwner, ErrHintTooLong
// or ErrCanceled. Last is the last attempt's error.
//
// errors.Is matches the Cause and, through Unwrap, everything Last matches. A retry
// may stop because its context was cancelled (Cause ErrCanceled). It then also
// matches context.Canceled. A retry may stop because the context's deadline passed,
// or left no room for another attempt (Cause ErrDeadline). It then matches
// context.DeadlineExceeded. The standard library's errors do the same.
//
// The Cause does not make the error a rejection (policy.ErrRejected). A retry may
// run out of budget or yield to an owner. It returns the failure it saw. So an
// owner above still sees a retryable error. A server's hint stays readable with
// fault.Hint.
type Error struct {
	Attempts int
	Cause    error
	Last     error
}

func (e *Error) Error() string {
	why := "gave up"
	if e.Cause != nil {
		why = strings.TrimPrefix(e.Cause.Error(), "retry: ")
	}
	noun := "attempts"
	if e.Attempts == 1 {
		noun = "attempt"
	}
	if e.Cause == ErrNotRetryable && e.Last != nil && !neverRetried(e.Last) && !fault.Of(e.Last).Stop {
		// Not refused nor marked permanent: the classifier's allow-list did not
		// match. Say how to widen it.
		why += " (mark it with fault.Retryable, or widen Options.ShouldRetry)"
	}
	return fmt.Sprintf("retry: %d %s, %s: %v", e.Attempts, noun, why, e.Last)
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Last }

// Is reports whether target is the Cause, or the context error the Cause stands
// for. That is context.Canceled for ErrCanceled, and context.DeadlineExceeded for
// ErrDeadline.
func (e *Error) Is(target error) bool {
	if target == nil {
		return false
	}
	switch {
	case target == e.Cause:
		return true
	case e.Cause == ErrCanceled:
		return target == context.Canceled
	case e.Cause == ErrDeadline:
		return target == context.DeadlineExceeded
	}
	return false
}
