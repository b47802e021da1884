// Package clock is Backstop's one seam for time. Every stage reads the time and
// waits through a [Clock] given in its Options; nil means the real clock. Tests
// hand in the fake of package policytest, or run under testing/synctest.
//
// A [Stopwatch] times one interval for an event, reading no more of the clock than
// the event's observer needs.
package clock
