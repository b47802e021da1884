package policy

import "time"

// Clock is the library's one seam for time: every package that reads the time or waits
// takes a Clock in its Options, where nil means [SystemClock]. Tests use the fake in
// package policytest.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a [Clock]'s timer. Stop reports whether it stopped the timer before it fired.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock returns the real clock, backed by package time.
func SystemClock() Clock { return systemClock{} }

// ClockOr returns c, or [SystemClock] if c is nil. Packages call it once in New.
func ClockOr(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
