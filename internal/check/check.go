// Package check holds the small arithmetic and validation helpers the stages share:
// saturating duration sums for worst cases, and the error shape of a bad option.
package check

import (
	"fmt"
	"math"
	"time"
)

// AddSat returns a+b for non-negative durations, saturating at the largest duration
// instead of overflowing.
func AddSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MulSat returns d×n for a non-negative d, saturating at the largest duration.
func MulSat(d time.Duration, n int) time.Duration {
	if n > 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// Invalid returns the refusal of a constructor whose result is a T: the zero T and an
// error wrapping sentinel (a package's ErrInvalidOptions) with the message that names
// the bad field.
func Invalid[T any](sentinel error) func(format string, args ...any) (T, error) {
	return func(format string, args ...any) (T, error) {
		var zero T
		return zero, Err(sentinel, format, args...)
	}
}

// Err is the error of a bad option: sentinel (a package's ErrInvalidOptions) wrapped
// with the message that names the field.
func Err(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
