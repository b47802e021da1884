package shed

import (
	"math"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// The CPU guard never refuses more than cpuMaxShare of new work, so that some is
// still admitted and timed, and windows go on closing.
const (
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

// runnableQueue reads how many goroutines are runnable now, and GOMAXPROCS.
func runnableQueue() (uint64, int) {
	s := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}, {Name: "/sched/gomaxprocs:threads"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 1 // a runtime without the metrics: no queue seen
	}
	return s[0].Value.Uint64(), max(1, int(s[1].Value.Uint64()))
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

// percentileSince returns the percentile p of the counts h gained since last, as the
// upper bound of its bucket, and the count gained. It then updates last to h's counts.
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

// cpuGuard refuses the share of new work this process's CPUs cannot serve while its
// own work queues for them; see the package doc's CPU section.
type cpuGuard struct {
	target time.Duration // LimitOptions.SchedLatency
	// read returns the scheduling latency of the window and how many goroutines it
	// saw; the runtime's by default, synthetic in tests.
	read func() (time.Duration, uint64)
	// queue returns how many goroutines wait for a CPU now, and GOMAXPROCS; the
	// runtime's by default, synthetic in tests.
	queue func() (runnable uint64, procs int)
	// counts returns the shedder's admitted and refused requests so far and its
	// requests in flight now.
	counts func() (admitted, refused uint64, inflight int64)
	// baseline returns the adaptive limit's baseline latency, 0 until known.
	baseline func() time.Duration
	share    atomic.Uint32 // refused share × cpuScale
	last     atomic.Int64  // when it last moved the share, Unix ns

	// Guarded by the gradient's lock.
	busy                      bool    // goroutines waited over the target in the last window
	served                    float64 // the most completed a second in a window, forgotten slowly
	arrivals                  float64 // arrivals per second, smoothed
	trim                      float64 // what the queue adds to or takes from the share
	engaged                   bool    // refusing since a window found the CPUs the bound
	prevAdmitted, prevRefused uint64
	prevInflight              int64
	prevRunnable              uint64
}

// The guard's settings.
const (
	// cpuRunnable is the queue of this process's own work the guard tolerates:
	// goroutines waiting for a CPU, per GOMAXPROCS.
	cpuRunnable = 16
	// cpuSmoothing is the weight of a window in the smoothed arrivals.
	cpuSmoothing = 0.3
	// cpuForget is what a window keeps of the most completed in a window.
	cpuForget = 0.99
	// The trim grows by cpuTrimUp, up to cpuTrimMax, each window the queue is long and
	// growing and the wait over the target. It falls by cpuTrimDown each window the
	// queue is short (twice that when nothing waits), as far as −1. At −1 it cancels
	// any share.
	cpuTrimUp   = 0.02
	cpuTrimDown = 0.01
	cpuTrimMax  = 0.3
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
		share = min(2*share, cpuMaxShare)
	}
	return u < share
}

// update moves the share on the window just closed, at now, and records in busy
// whether goroutines waited over the target for a CPU. Its callers hold the
// gradient's lock.
func (c *cpuGuard) update(now time.Time) {
	prev := c.last.Swap(now.UnixNano())
	admitted, refused, inflight := c.counts()
	lat, n := c.read()
	runnable, procs := c.queue()
	age := time.Duration(now.UnixNano() - prev).Seconds()
	if prev == 0 || age <= 0 || n == 0 {
		c.prevAdmitted, c.prevRefused, c.prevInflight, c.prevRunnable = admitted, refused, inflight, runnable
		c.busy = false
		return
	}
	// Completions, and arrivals. Arrivals are those that reached the shedder, plus the
	// growth of the queue for a CPU in front of it. A shrinking queue takes what it
	// drains off them.
	done := math.Max(0, float64(since(admitted, c.prevAdmitted))-float64(inflight-c.prevInflight)) / age
	seen := float64(since(admitted, c.prevAdmitted) + since(refused, c.prevRefused))
	arrivals := math.Max(0, seen+float64(runnable)-float64(c.prevRunnable)) / age
	growing := runnable >= c.prevRunnable
	c.prevAdmitted, c.prevRefused, c.prevInflight, c.prevRunnable = admitted, refused, inflight, runnable
	c.arrivals = ewma(c.arrivals, arrivals, cpuSmoothing)

	target := cpuRunnable * float64(procs)
	queued := float64(runnable) > target
	saturated := queued && lat > c.target
	// What the CPUs serve: at least the most completed in a window lately. For work
	// that holds its CPU while it runs, it is at least GOMAXPROCS ÷ its baseline
	// latency.
	c.served = math.Max(c.served*cpuForget, done)
	capacity := c.served
	if base := c.baseline(); base > 0 {
		capacity = math.Max(capacity, float64(procs)/base.Seconds())
	}
	if saturated {
		c.engaged = true
	}
	share := 0.0
	if c.engaged {
		switch {
		case saturated && growing:
			c.trim = math.Min(cpuTrimMax, c.trim+cpuTrimUp) // the queue is not yet draining
		case !queued && runnable <= uint64(procs):
			c.trim = math.Max(-1, c.trim-2*cpuTrimDown) // nothing waits: the CPUs may idle
		case !queued:
			c.trim = math.Max(-1, c.trim-cpuTrimDown)
		}
		share = math.Min(cpuMaxShare, 1-capacity/c.arrivals+c.trim)
		if share < 0.01 {
			share, c.trim, c.engaged = 0, 0, false // the demand fits: stand down
		}
	}
	c.share.Store(uint32(share * cpuScale))
	c.busy = lat > c.target // the wait is the CPUs', whoever holds them
}

// ewma moves avg a share w of the way to x; a zero avg starts at x.
func ewma(avg, x, w float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + w*(x-avg)
}

// due reports whether a window has passed since the share last moved.
func (c *cpuGuard) due(now time.Time, window time.Duration) bool {
	return now.UnixNano()-c.last.Load() >= int64(window)
}
