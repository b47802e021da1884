// Package window counts two quantities over a sliding window kept in ten buckets:
// calls and retries for budget.Ratio, requests and accepts for throttle.
package window

import "time"

// Buckets is the number of counters a window is split into: counts age out in steps
// of a tenth of the window.
const Buckets = 10

// Pair is a sliding window of two counts. It is not safe for concurrent use: its
// owner holds a lock. Build it with [New].
type Pair struct {
	origin  time.Time // buckets count from here, on the monotonic clock where there is one
	width   int64     // nanoseconds per bucket
	buckets [Buckets]bucket
}

type bucket struct {
	epoch int64 // bucket number since origin; stale buckets count nothing
	a, b  int64
}

// New returns an empty window of length d (at least Buckets ns) starting at origin.
func New(origin time.Time, d time.Duration) Pair {
	return Pair{origin: origin, width: max(int64(d)/Buckets, 1)}
}

// epoch returns the number of the bucket now falls in. It measures from origin with
// time.Time.Sub, which uses the monotonic clock when both times carry it, so a step of
// the wall clock (NTP, a fake clock before 1970) neither panics nor miscounts.
func (w *Pair) epoch(now time.Time) int64 {
	d := int64(now.Sub(w.origin))
	e := d / w.width
	if d < 0 && d%w.width != 0 {
		e-- // floor, for a fake clock set before origin
	}
	return e
}

// Add adds a and b to the bucket of now.
func (w *Pair) Add(now time.Time, a, b int64) {
	epoch := w.epoch(now)
	bk := &w.buckets[(epoch%Buckets+Buckets)%Buckets]
	if bk.epoch != epoch {
		*bk = bucket{epoch: epoch}
	}
	bk.a += a
	bk.b += b
}

// Sums returns the counts of the window ending now.
func (w *Pair) Sums(now time.Time) (a, b int64) {
	epoch := w.epoch(now)
	for i := range w.buckets {
		if bk := &w.buckets[i]; bk.epoch <= epoch && epoch-bk.epoch < Buckets {
			a += bk.a
			b += bk.b
		}
	}
	return a, b
}
