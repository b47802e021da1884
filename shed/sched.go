package shed

import (
	"math"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"time"
)

// The share of new work refused while the process's CPUs are saturated
// (LimitOptions.SchedLatency) moves by these steps, once a window: up by cpuStep while
// the scheduling latency is above the target, down by half while it is below half the
// target, held between. It never refuses more than cpuMaxShare, so that some work is
// still admitted and timed, and windows go on closing.
const (
	cpuStep     = 0.1
	cpuMaxShare = 0.95
	// cpuPercentile is the percentile of the window's scheduling latencies compared
	// with the target.
	cpuPercentile = 0.9
	// cpuScale is the fixed point of the share: the admit path reads it as an integer.
	cpuScale = 1 << 16
)

// schedMetric is the runtime's histogram of the time goroutines spent runnable before
// they ran.
const schedMetric = "/sched/latencies:seconds"

// schedReader reads the runtime's scheduling latencies and returns a percentile of
// those recorded since its last read. It is not safe for concurrent use: the gradient
// calls it under its lock.
type schedReader struct {
	sample []metrics.Sample
	last   []uint64
}

func newSchedReader() *schedReader {
	r := &schedReader{sample: []metrics.Sample{{Name: schedMetric}}}
	r.read() // the latencies before the shedder was built are not its business
	return r
}

// read returns the cpuPercentile of the scheduling latencies since the last read, and
// how many there were.
func (r *schedReader) read() (time.Duration, uint64) {
	metrics.Read(r.sample)
	if r.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0 // a runtime without the metric: no signal
	}
	h := r.sample[0].Value.Float64Histogram()
	if len(r.last) != len(h.Counts) {
		r.last = make([]uint64, len(h.Counts))
	}
	return percentileSince(h, r.last, cpuPercentile)
}

// percentileSince returns the percentile p of the counts h gained since last (which
// it then updates to h's), as the upper bound of its bucket, and the count gained.
func percentileSince(h *metrics.Float64Histogram, last []uint64, p float64) (time.Duration, uint64) {
	var n uint64
	for i, c := range h.Counts {
		n += c - last[i]
	}
	var d time.Duration
	if n > 0 {
		want := uint64(math.Ceil(p * float64(n)))
		var seen uint64
		for i, c := range h.Counts {
			if seen += c - last[i]; seen >= want {
				d = secondsDuration(h.Buckets[i+1])
				break
			}
		}
	}
	copy(last, h.Counts)
	return d, n
}

// secondsDuration converts a bucket bound in seconds to a Duration, +Inf to the
// largest.
func secondsDuration(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/1e9 {
		return math.MaxInt64
	}
	return time.Duration(s * 1e9)
}

// cpuGuard refuses a share of new work while goroutines wait too long for a CPU.
//
// The scheduling latency cannot tell this process's own queue from an operating
// system that gives it less CPU than it has threads (a busy machine, a container's
// CPU quota): there, refusing more does not bring the latency down, and a share that
// grew while it stayed high would refuse work the server could do. So the share never
// exceeds what brings the work admitted down to 90 % of the most the server has
// completed in a window lately: 1 − 0.9 × best completions ÷ arrivals. While the guard
// refuses, its windows' completions are held down by the guard itself, so they may
// raise the best but never lower it; the best falls only as windows without
// refusals replace it (after cpuWindows of them). Sheddable work is refused at twice
// the share, but never past that cap either.
type cpuGuard struct {
	target time.Duration
	// read returns the scheduling latency of the window and how many goroutines it
	// saw; the runtime's by default, synthetic in tests.
	read func() (time.Duration, uint64)
	// counts returns the shedder's admitted and refused requests so far and its
	// requests in flight now.
	counts func() (admitted, refused uint64, inflight int64)
	share  atomic.Uint32 // refused share × cpuScale
	cap    atomic.Uint32 // the most it may refuse now × cpuScale (see cpuGuard)
	last   atomic.Int64  // when it last moved the share, Unix ns

	// Guarded by the gradient's lock: the counts when the share last moved, and the
	// completions per second of the last windows.
	prevAdmitted, prevRefused uint64
	prevInflight              int64
	completed                 [cpuWindows]float64
	next                      int
}

// cpuWindows is how many windows' completion rates the guard remembers; cpuHeadroom is
// the share of the best of them it admits at most while it refuses.
const (
	cpuWindows  = 100
	cpuHeadroom = 0.9
)

// refuses reports whether the guard refuses work whose random draw is u in [0, 1):
// critical work never, sheddable work at twice the share.
func (c *cpuGuard) refuses(p Priority, u float64) bool {
	sh := c.share.Load()
	if sh == 0 || p > 0 {
		return false
	}
	share := float64(sh) / cpuScale
	if p < 0 {
		share = min(2*share, float64(c.cap.Load())/cpuScale)
	}
	return u < share
}

// update moves the share on the latency of the window just closed, at now, and
// reports whether goroutines waited over the target for a CPU. Its callers hold the
// gradient's lock.
func (c *cpuGuard) update(now time.Time) (saturated bool) {
	prev := c.last.Swap(now.UnixNano())
	admitted, refused, inflight := c.counts()
	age := time.Duration(now.UnixNano() - prev).Seconds()
	var arrivals float64 // per second, since the share last moved
	if prev != 0 && age > 0 {
		// Completions: what was admitted, less what is still in flight of it.
		done := math.Max(0, float64(since(admitted, c.prevAdmitted))-float64(inflight-c.prevInflight)) / age
		if c.share.Load() != 0 {
			done = math.Max(done, slices.Max(c.completed[:])) // held down by the guard: raises the best, never lowers it
		}
		c.completed[c.next] = done
		c.next = (c.next + 1) % cpuWindows
		arrivals = float64(since(admitted, c.prevAdmitted)+since(refused, c.prevRefused)) / age
	}
	c.prevAdmitted, c.prevRefused, c.prevInflight = admitted, refused, inflight
	lat, n := c.read()
	share := float64(c.share.Load()) / cpuScale
	switch {
	case n == 0:
		return false
	case lat > c.target:
		saturated = true
		share = math.Min(cpuMaxShare, share+cpuStep)
	case lat <= c.target/2:
		if share /= 2; share < 0.01 {
			share = 0
		}
	}
	limit := cpuMaxShare
	if best := slices.Max(c.completed[:]); arrivals > 0 && best > 0 {
		limit = math.Min(limit, math.Max(0, 1-cpuHeadroom*best/arrivals))
	}
	share = math.Min(share, limit)
	c.cap.Store(uint32(limit * cpuScale))
	c.share.Store(uint32(share * cpuScale))
	return saturated
}

// due reports whether a window has passed since the share last moved.
func (c *cpuGuard) due(now time.Time, window time.Duration) bool {
	return now.UnixNano()-c.last.Load() >= int64(window)
}
