package shed

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/policy"
)

// Defaults of the adaptive limit, for zero Options fields.
const (
	DefaultInitialLimit = 20
	DefaultMinLimit     = 4
	DefaultMaxLimit     = 1000
	DefaultSmoothing    = 0.2
	DefaultTolerance    = 1.5
	DefaultHeadroom     = 4
	DefaultWindow       = 500 * time.Millisecond
	DefaultMinSamples   = 10
	DefaultLongWindows  = 60
	// DefaultLatencySamples is how many latencies a window aims to hold: once a
	// window admits more requests than this, the next times a random share of them.
	DefaultLatencySamples = 256
)

// gradient is the adaptive concurrency limit, after Netflix concurrency-limits'
// Gradient2. Latencies are averaged over a sample window; each window's average is the
// short RTT; the baseline is an exponential average over LongWindows windows, bounded
// above by the best window of the last LongWindows (see baselineLocked). Then
//
//	gradient = clamp(Tolerance · baseline / short, 0.5, 1)
//	target   = limit · gradient + Headroom
//	limit    = limit · (1 − Smoothing) + target · Smoothing, within [MinLimit, MaxLimit]
//
// so the limit grows by up to Headroom·Smoothing per window while latency stays within
// Tolerance of the baseline and shrinks (at most halving the target) when it does not.
// The mean of a uniform random sample of a window's latencies estimates its mean as
// well as all of them do, to within a few per cent for a few hundred samples, so a
// busy server times only about LatencySamples requests a window: one in k at random,
// where k is the requests a window admitted at the rate of the window before ÷
// LatencySamples (at least 1). A window that has timed 2, 4, 8… times LatencySamples
// before it ends doubles k each time, so a server starting busy, or a sudden surge, is
// not timed in full for a whole window; one that has ended short of MinSamples lowers k
// to the rate since it began, so a fall in traffic does not leave the limit waiting. Reading the clock
// twice is most of what admitting a request costs; the in-flight high-water mark is
// kept for every request.
//
// A window in which less than half the limit was in use changes nothing (the server is
// not limited by concurrency, so latency says nothing about the limit). When the short
// RTT falls below half the long one, the baseline decays 5 % a window to follow a
// latency that has improved for good.
type gradient struct {
	min, max       float64
	smoothing, tol float64
	headroom       float64
	window         time.Duration
	minSamples     int
	longAlpha      float64
	samples        int64 // LatencySamples

	stride atomic.Int64 // one request in stride is timed, at random; ≥ 1

	// The current window's samples, added without a lock: every release records one,
	// so a mutex here would serialise the server. Samples that land while a window is
	// being closed count towards the next one.
	start       atomic.Int64 // window start, Unix ns; 0 before the first sample
	sum         atomic.Int64 // ns
	n           atomic.Int64
	maxInflight atomic.Int64

	mu     sync.Mutex // guards the fields below; held only to close a window
	limit  float64
	long   float64 // EMA of window means, ns; 0 until the first window
	recent [DefaultLongWindows]float64
	next   int           // where the next window mean goes in recent
	base   atomic.Int64  // the baseline, for readers without the lock
	seen   atomic.Uint64 // requests admitted when the last window closed
}

// strideFor returns the stride that times about LatencySamples requests a window when
// requests were admitted over age.
func (g *gradient) strideFor(requests uint64, age time.Duration) int64 {
	if age <= 0 {
		return 1
	}
	perWindow := float64(requests) * float64(g.window) / float64(age)
	return min(max(1, int64(perWindow)/g.samples), maxStride)
}

// admitted records a request admitted with inflight in flight and reports whether to
// time it.
func (g *gradient) admitted(inflight int64, r policy.Rand) bool {
	for m := g.maxInflight.Load(); inflight > m && !g.maxInflight.CompareAndSwap(m, inflight); m = g.maxInflight.Load() {
	}
	k := g.stride.Load()
	return k <= 1 || r.Float64()*float64(k) < 1
}

// maxStride bounds the stride: even at millions of requests a second, some are timed.
const maxStride = 1 << 20

// baselineLocked is the latency the limit is judged against: the long EMA, but never
// above the best window mean of the last LongWindows windows. Without that bound a
// baseline learnt while the server was already queueing would drift upwards with the
// queue it tolerates; with it the baseline follows real improvements at once and real
// slow-downs after LongWindows windows. mu must be held.
func (g *gradient) baselineLocked() float64 {
	best := g.long
	for _, m := range g.recent {
		if m > 0 && m < best {
			best = m
		}
	}
	return best
}

// sample records the latency of a request [gradient.admitted] chose to time; admitted
// is the count of every request admitted so far. It returns the new limit and whether
// it changed.
func (g *gradient) sample(now time.Time, rtt time.Duration, admitted uint64) (int64, bool) {
	t := now.UnixNano()
	g.start.CompareAndSwap(0, t)
	g.sum.Add(int64(rtt))
	n := g.n.Add(1)
	age := time.Duration(t - g.start.Load())
	switch {
	case n >= 2*g.samples && n%g.samples == 0 && (n/g.samples)&(n/g.samples-1) == 0:
		// 2, 4, 8… times the samples wanted, before the window ends: time half as many.
		if k := g.stride.Load(); k < maxStride {
			g.stride.CompareAndSwap(k, 2*k)
		}
	case age >= g.window && n < int64(g.minSamples):
		// The window is over but short of samples: traffic fell since the stride was
		// set. Time as many as the rate since the window began allows.
		if k := g.strideFor(admitted-g.seen.Load(), age); k < g.stride.Load() {
			g.stride.Store(k)
		}
	}
	if age < g.window || n < int64(g.minSamples) || !g.mu.TryLock() {
		return 0, false
	}
	defer g.mu.Unlock()
	// Re-check under the lock: another goroutine may have closed this window.
	if age = time.Duration(t - g.start.Load()); age < g.window || g.n.Load() < int64(g.minSamples) {
		return 0, false
	}
	g.stride.Store(g.strideFor(admitted-g.seen.Load(), age))
	g.seen.Store(admitted)
	g.start.Store(t)
	count, sum, used := g.n.Swap(0), g.sum.Swap(0), g.maxInflight.Swap(0)
	short := float64(sum) / float64(count)
	if short <= 0 {
		return 0, false
	}
	if g.long == 0 {
		g.long = short
	} else {
		g.long += g.longAlpha * (short - g.long)
	}
	if g.long/short > 2 {
		g.long *= 0.95
	}
	g.recent[g.next] = short
	g.next = (g.next + 1) % len(g.recent)
	base := g.baselineLocked()
	g.base.Store(int64(base))
	if float64(used) < g.limit/2 {
		return 0, false
	}
	grad := math.Max(0.5, math.Min(1, g.tol*base/short))
	target := g.limit*grad + g.headroom
	old := int64(g.limit)
	g.limit = math.Max(g.min, math.Min(g.max, g.limit*(1-g.smoothing)+target*g.smoothing))
	return int64(g.limit), int64(g.limit) != old
}

// baseline returns the long RTT, 0 until known.
func (g *gradient) baseline() time.Duration { return time.Duration(g.base.Load()) }
