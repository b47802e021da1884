package retry

import (
	"errors"
	"fmt"
	"strings"
)

// Why a retry gave up: the Cause of an [*Error], matched with errors.Is.
var (
	ErrExhausted    = errors.New("retry: attempts exhausted")
	ErrDeadline     = errors.New("retry: the next attempt would start past the deadline")
	ErrBudget       = errors.New("retry: budget exhausted")
	ErrNotRetryable = errors.New("retry: error not retryable")
	ErrOwner        = errors.New("retry: another layer owns retries on this call path")
	ErrCanceled     = errors.New("retry: context done")

	// ErrInvalidOptions is matched by New's errors for bad Options.
	ErrInvalidOptions = errors.New("retry: invalid options")
)

// Error is returned by a retry that gave up: after its last attempt failed, the call
// was not retried further. Attempts counts the attempts made; Cause is one of
// ErrExhausted, ErrDeadline, ErrBudget, ErrNotRetryable, ErrOwner or ErrCanceled; Last
// is the last attempt's error.
//
// errors.Is matches the Cause and, through Unwrap, everything Last matches. The Cause
// does not make the error a rejection: a retry that ran out of budget or yielded to an
// owner returns the failure it saw, so an owner above still sees a retryable error.
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
	return fmt.Sprintf("retry: %d %s, %s: %v", e.Attempts, noun, why, e.Last)
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Last }

// Is reports whether target is the Cause.
func (e *Error) Is(target error) bool { return target != nil && target == e.Cause }
