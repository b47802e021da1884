package shed

import (
	"math"
	"sync"
	"time"
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
)

// gradient is the adaptive concurrency limit, after Netflix concurrency-limits'
// Gradient2. Latencies are averaged over a sample window; each window's average is the
// short RTT and an exponential average over LongWindows windows the long RTT, the
// baseline. Then
//
//	gradient = clamp(Tolerance · long / short, 0.5, 1)
//	target   = limit · gradient + Headroom
//	limit    = limit · (1 − Smoothing) + target · Smoothing, within [MinLimit, MaxLimit]
//
// so the limit grows by up to Headroom·Smoothing per window while latency stays within
// Tolerance of the baseline and shrinks (at most halving the target) when it does not.
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

	mu          sync.Mutex // guards the fields below
	limit       float64
	long        float64 // ns; 0 until the first window
	start       time.Time
	sum         float64 // ns
	n           int
	maxInflight int64
}

// sample records one request's latency and the in-flight count when it was admitted.
// It returns the new limit and whether it changed.
func (g *gradient) sample(now time.Time, rtt time.Duration, inflight int64) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.start.IsZero() {
		g.start = now
	}
	g.sum += float64(rtt)
	g.n++
	g.maxInflight = max(g.maxInflight, inflight)
	if now.Sub(g.start) < g.window || g.n < g.minSamples {
		return int64(g.limit), false
	}
	short := g.sum / float64(g.n)
	used := g.maxInflight
	g.start, g.sum, g.n, g.maxInflight = now, 0, 0, 0
	if short <= 0 {
		return int64(g.limit), false
	}
	if g.long == 0 {
		g.long = short
	} else {
		g.long += g.longAlpha * (short - g.long)
	}
	if g.long/short > 2 {
		g.long *= 0.95
	}
	if float64(used) < g.limit/2 {
		return int64(g.limit), false
	}
	grad := math.Max(0.5, math.Min(1, g.tol*g.long/short))
	target := g.limit*grad + g.headroom
	old := int64(g.limit)
	g.limit = math.Max(g.min, math.Min(g.max, g.limit*(1-g.smoothing)+target*g.smoothing))
	return int64(g.limit), int64(g.limit) != old
}

// baseline returns the long RTT, 0 until known.
func (g *gradient) baseline() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Duration(g.long)
}
