package clock

import (
	"time"

	"github.com/backstop-go/backstop/event"
)

// Clock is the library's one seam for time. Every package that reads the time or
// waits takes a Clock in its Options. There, nil means [System]. Tests use the
// fake in package policytest.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has
	// passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a [Clock]'s timer. Stop reports whether it stopped the timer before it
// fired.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// System returns the real clock, backed by package time.
func System() Clock { return systemClock{} }

// Or returns c, or [System] if c is nil. Packages call it once in New.
func Or(c Clock) Clock {
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

// The bits of event.Needs a Stopwatch reads: a wall-clock time, an elapsed time.
const (
	needsTime    = event.NeedsTiming &^ event.NeedsElapsed
	needsElapsed = event.NeedsElapsed &^ event.NeedsEvent
)

// A Stopwatch times one interval on a Clock for an event. It reads no more of the
// clock than the event needs:
//   - nothing for [NeedsNothing] and [NeedsEvent];
//   - on the system clock, for [NeedsElapsed], the monotonic clock alone. That is
//     time.Since of a reading taken once. It skips the wall clock time.Now also
//     reads;
//   - otherwise, Clock.Now at both ends.
//
// Stages start one where an interval begins, and Stop it where it ends.
//
// A Stopwatch is a small value kept in the stage's locals. It holds no lock, and
// may be copied. The zero value reads nothing and stops at zero.
type Stopwatch struct {
	clock Clock
	needs event.Needs
	start time.Time     // Clock.Now at the start, when read
	mono  time.Duration // monotonic time since epoch at the start: NeedsElapsed on the system clock
}

// epoch is the reading monotonic stopwatch times are measured from.
var epoch = time.Now()

// StartStopwatch starts timing an interval on c for an event that needs needs.
func StartStopwatch(c Clock, needs event.Needs) Stopwatch {
	if needs&(needsTime|needsElapsed) == 0 {
		return Stopwatch{needs: needs} // small enough to inline: an untimed event costs nothing
	}
	return startStopwatch(c, needs)
}

func startStopwatch(c Clock, needs event.Needs) Stopwatch {
	w := Stopwatch{clock: c, needs: needs}
	if needs&needsTime == 0 && IsSystem(c) {
		w.mono = time.Since(epoch)
	} else {
		w.start = c.Now()
	}
	return w
}

// Started returns the time the stopwatch started. It is zero unless its needs
// include the time.
func (w Stopwatch) Started() time.Time { return w.start }

// Stop returns the time now, and the time elapsed since the start. Each is zero if
// the needs do not include it. The time is also given whenever the clock was read
// anyway.
func (w Stopwatch) Stop() (now time.Time, elapsed time.Duration) {
	if w.needs&(needsTime|needsElapsed) == 0 {
		return time.Time{}, 0
	}
	return w.stop()
}

func (w Stopwatch) stop() (now time.Time, elapsed time.Duration) {
	if w.needs&needsTime == 0 && IsSystem(w.clock) {
		return time.Time{}, time.Since(epoch) - w.mono
	}
	now = w.clock.Now()
	return now, now.Sub(w.start)
}

// IsSystem reports whether c is the real clock, whose readings carry the monotonic
// clock. A stage may then time an interval with time.Since alone.
func IsSystem(c Clock) bool {
	_, ok := c.(systemClock)
	return ok
}
