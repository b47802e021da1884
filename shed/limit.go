package shed

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/jitter"
)

// Defaults of the adaptive limit, for zero Options fields.
const (
	// DefaultInitialLimit is the limit before any measurement. It is the largest, so
	// that a healthy server is never refused while the limit learns. It comes down only
	// on evidence of congestion: latency above Tolerance, or goroutines waiting for a
	// CPU.
	DefaultInitialLimit = DefaultMaxLimit
	// DefaultMinLimit is one request in flight. A server on one core whose work is
	// CPU-bound serves best at about that many.
	DefaultMinLimit = 1
	DefaultMaxLimit = 1000
	// DefaultSmoothing is the weight of a congested window's target in the new limit.
	// The limit moves 70 % of the way to limit × Tolerance · baseline / latency.
	DefaultSmoothing = 0.7
	DefaultTolerance = 1.5
	// DefaultHeadroom is the least a saturated window with good latency adds to the
	// limit.
	DefaultHeadroom = 4
	// DefaultWindow is the sample window. It is short enough that a limit halving each
	// window comes down from 1000 to 8 within a second.
	DefaultWindow     = 100 * time.Millisecond
	DefaultMinSamples = 10
	// DefaultLongWindows is how many window means the baseline remembers. The baseline
	// is the third least of them. So a slow-down is learnt after this many windows at
	// the latest (10 s at the default Window). An improvement is learnt within three.
	DefaultLongWindows = 100
	// baselineRank is the baseline's rank among the windows remembered, once
	// baselineKnown × (baselineRank − 1) windows are.
	baselineRank  = 3
	baselineKnown = 10
	// DefaultLatencySamples is how many latencies a window aims to hold. Once a window
	// admits more requests than this, the next times a random share of them.
	DefaultLatencySamples = 256
	// DefaultSchedLatency is the wait for a CPU over which the shedder starts refusing
	// new work. It is taken at the 90th percentile of a window's goroutines (see
	// LimitOptions.SchedLatency).
	DefaultSchedLatency = 20 * time.Millisecond
	// SchedLatencyOff, as LimitOptions.SchedLatency, turns the CPU guard off.
	SchedLatencyOff = -1
)

// Growth and the test for a latency that fewer requests in flight do not lower.
const (
	// growMargin is the share of spare slots the limit keeps above the in-flight
	// count Little's law asks for.
	growMargin = 0.25
	// An episode of congestion can show a slow-down that concurrency does not cause. It
	// does when three things hold over at least insensitiveWindows windows. The
	// requests in flight have fallen to at most insensitiveFall of where they began.
	// The work completed per second has fallen to at most insensitiveRate × that share
	// of where it began. And the latency has stayed above insensitiveLatency of where
	// it began. Then the baseline becomes the new latency, and the limit returns to
	// where it was.
	insensitiveFall    = 0.6
	insensitiveWindows = 3
	insensitiveLatency = 0.85
	insensitiveRate    = 1.25
	// A probe follows probeAfter saturated windows whose latency is within Tolerance of
	// the baseline but above probeAbove of it. Windows above Tolerance between them do
	// not break the count; one at the baseline or not saturated does. The probe halves
	// the limit for two windows to measure the latency of less concurrency. Envoy's
	// adaptive concurrency filter re-measures its minimum RTT the same way.
	probeAbove = 1.2
	probeAfter = 3
	// A probe's second window may admit at least probeHeld of the rate before it. The
	// probe then held the server's throughput at half the concurrency. The limit stays
	// at the probe's, and the next probe halves it again. So a server far past its knee
	// finds the knee in a few probes, rather than a few per halving. Such a server may
	// be a CPU-bound one offered many times what its cores serve.
	probeHeld = 0.9
	// A probe that did not hold measured what the baseline already says. The next waits
	// twice as many elevated windows as the last, up to probeAfterMax, until a probe
	// holds. Each probe serves half the concurrency for two windows. Some servers sit
	// in the tolerance for reasons of their own: work near capacity, noisy query times,
	// other tenants that delay their threads. Without the doubling, they would give up
	// a fifth of their windows to probes. The cap probeAfterMax keeps two probes within
	// the windows the baseline remembers. So what they measured stays in it.
	probeAfterMax = DefaultLongWindows/2 - 2
	// A probe window that lasts over probeStale Windows measured nothing. Its successes
	// stopped, because the server's own dependency failed. The limit returns to where
	// the series of probes began.
	probeStale = 3
	// A window may have a latency over clampAt × Tolerance above the baseline, with
	// less than half the limit in use. Before it is judged, the limit comes down to
	// twice the in-flight peak.
	clampAt = 3
)

// gradient is the adaptive concurrency limit. Each sample window is Window old and
// holds MinSamples latencies. It closes with these values:
//
//   - short: the mean latency of the work that succeeded in it;
//   - err: that mean's standard error;
//   - the baseline: about the least window mean of the last LongWindows windows (see
//     [gradient.baselineLocked]);
//   - used: the most requests in flight at once;
//   - arrivals: the requests that arrived, admitted or refused at the limit.
//
// With r = (short − err) / baseline:
//
//   - r ≤ Tolerance and the limit was the bound (a request found it full, or used
//     reached it): the limit grows to what Little's law asks for. That is arrival rate
//     × short, plus 25 %. It grows at least by Headroom. It grows by at most a factor
//     that falls from 2 at r ≤ 1 to 1 at r = Tolerance. A server whose latency stays
//     flat as concurrency grows is followed within a few windows. One nearing its knee
//     is approached gently, so the limit does not oscillate about it.
//   - r > Tolerance and at least half the limit in use: the limit moves Smoothing of
//     the way to limit × Tolerance / r. It at most halves a window.
//   - otherwise the limit holds: a server not bound by its limit says nothing of it.
//
// A slow-down that fewer requests in flight do not cure is recognised within a few
// windows. In such a slow-down a dependency is slower, not this server's own queue.
// Take an episode of shrinking windows that has cut the requests in flight to 60 % of
// where they began. Say the work completed per second has fallen with them, to at most
// 1.25× their share. If the latency has also not fallen below 85 % of where it began,
// the baseline becomes the latency of now. The limit returns to where the episode
// began. A concurrency-bound server completes as much with fewer in flight, and it
// keeps shrinking. Its latency falls as its queue drains, later than the limit, since
// what completes was admitted before.
//
// The converse is a baseline learnt while the server already queued. It would let the
// limit sit well past the knee, and a probe finds it. After 3 saturated windows whose
// latency is within Tolerance of the baseline but above 1.2× it, the limit is halved
// for two windows. The first still holds work admitted before. Windows above the
// tolerance between those 3 do not break the count: a limit that sits at the knee
// alternates between the two.
//
// If the probe's second window admitted at least 90 % of the rate of the window before
// it, half the concurrency served as much. The server was queueing, and the next probe
// halves the limit again. Otherwise the limit is restored. What the probe measured
// enters the baseline, and the next windows bring the limit to it. The next probe then
// waits for twice as many such windows as this one did: 6, 12, … up to 48, until a
// probe holds. A probe window that lasts over 3 Windows measured nothing: no success
// was timed, as the server's own dependency failed. The limit then returns to where the
// probes began. The package doc says why probes are paced so, under "How the limit
// learns".
//
// Only successes are timed; see the package doc.
//
// A busy server times only about LatencySamples requests a window: one in k at random.
// Here k is the requests a window admitted at the rate of the window before ÷
// LatencySamples (at least 1). A window that has timed 2, 4, 8… times LatencySamples
// before it ends doubles k each time. So a server starting busy, or a sudden surge, is
// not timed in full for a whole window. A window that has ended short of MinSamples
// lowers k to the rate since it began. So a fall in traffic does not leave the limit
// waiting. The in-flight high-water mark is kept for every request.
type gradient struct {
	min, max       float64
	smoothing, tol float64
	headroom       float64
	window         time.Duration
	minSamples     int
	samples        int64 // LatencySamples

	stride atomic.Int64 // one request in stride is timed, at random; ≥ 1
	// systemRand: the shedder draws from jitter.System(), so admitted may draw from
	// the runtime's generator directly.
	systemRand bool
	cpu        *cpuGuard // nil unless LimitOptions.SchedLatency is set

	// The current window's samples, added without a lock. Every release records one, so
	// a mutex here would serialise the server. Samples that land while a window is
	// being closed count towards the next one.
	start       atomic.Int64 // window start, Unix ns; 0 before the first sample
	sum         atomic.Int64 // ns
	sumSq       atomic.Int64 // µs², for the window mean's standard error
	n           atomic.Int64
	maxInflight atomic.Int64
	full        atomic.Int64 // requests that found the limit full (queued or refused), ever

	mu     sync.Mutex // guards the fields below; held only to close a window
	limit  float64
	recent [DefaultLongWindows]float64 // window means, ns; 0: none yet
	next   int                         // where the next window mean goes in recent
	// The episode of congestion under way: the limit and latency it began with, and its
	// windows so far. episodeWindows 0 means none.
	episodeLimit, episodeShort float64
	episodeUsed                int64
	episodeRate                float64 // completions per second
	episodeWindows             int
	// elevated counts the saturated windows in a row with a latency above probeAbove of
	// the baseline. The limit to return to after a probe window is probeLimit, 0 when
	// none is under way.
	elevated    int
	probeAfter  int // elevated windows the next probe waits for, probeAfter to probeAfterMax
	probeLimit  float64
	probeOrigin float64       // the limit before the first of a series of probes
	probing     int           // windows of the probe closed so far
	probeRate   float64       // admissions per second of the window before the probe
	base        atomic.Int64  // the baseline, for readers without the lock
	seen        atomic.Uint64 // requests admitted when the last window closed
	seenFull    int64         // full when the last window closed
	seenRefused uint64        // refused at the limit when the last window closed
	seenFlight  int64         // in flight when the last window closed
}

// window is what a closing sample window saw.
type window struct {
	age   time.Duration
	short float64 // mean latency of the successes timed, ns
	err   float64 // short's standard error, ns
	used  int64   // most in flight at once
	// arrivals is the requests that arrived: admitted, or refused for want of a slot.
	arrivals uint64
	admitted uint64 // the requests admitted
	// completed is the requests that ended, however: admitted, less the growth of
	// the requests in flight.
	completed float64
	full      int64 // requests that found the limit full
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
func (g *gradient) admitted(inflight int64, r jitter.Rand) bool {
	for m := g.maxInflight.Load(); inflight > m && !g.maxInflight.CompareAndSwap(m, inflight); m = g.maxInflight.Load() {
	}
	k := g.stride.Load()
	switch {
	case k <= 1:
		return true
	case g.systemRand:
		// The same odds, one in k, from the runtime's generator: no float, no call
		// through r.
		return uint64(rand.Uint32())*uint64(k) < 1<<32
	}
	return r.Float64()*float64(k) < 1
}

// maxStride bounds the stride: even at millions of requests a second, some are timed.
const maxStride = 1 << 20

// maxSquaredMicros bounds a latency in the window's sum of squares (10 s). So 92 000
// such samples fit in an int64, far more than a window times.
const maxSquaredMicros = int64(10 * time.Second / time.Microsecond)

// baselineLocked is the latency the limit is judged against. It is the baselineRank-th
// (third) best of the last LongWindows windows, or the best while fewer are known. Each
// window is entered at its mean plus the mean's standard error. The package doc says
// why, under "How the limit learns". Real slow-downs are followed after LongWindows
// windows, or sooner (see [gradient]). mu must be held.
func (g *gradient) baselineLocked() float64 {
	var ranked [baselineRank]float64 // the best so far, ascending; 0: none
	known := 0
	for _, m := range g.recent {
		if m <= 0 {
			continue
		}
		known++
		for i := range ranked {
			if ranked[i] == 0 || m < ranked[i] {
				copy(ranked[i+1:], ranked[i:])
				ranked[i] = m
				break
			}
		}
	}
	if known == 0 {
		return math.Inf(1)
	}
	// The best while few are known, the second from baselineKnown windows on, and the
	// third from twice that. Three windows of a surge from the start must not make the
	// baseline of a server that was idle in the first.
	return ranked[min(baselineRank, known/baselineKnown+1)-1]
}

// sample records the latency of a request [gradient.admitted] chose to time. The counts
// admitted and refused are every request admitted, and refused for want of a slot, so
// far. It returns the new limit and whether it changed.
func (g *gradient) sample(now time.Time, rtt time.Duration, admitted, refused uint64, inflight int64) (int64, bool) {
	t := now.UnixNano()
	g.start.CompareAndSwap(0, t)
	g.sum.Add(int64(rtt))
	us := min(int64(rtt/time.Microsecond), maxSquaredMicros) // the sum of squares cannot overflow
	g.sumSq.Add(us * us)
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
	g.stride.Store(g.strideFor(since(admitted, g.seen.Load()), age))
	full := g.full.Load()
	w := window{age: age, admitted: since(admitted, g.seen.Load()), full: max(0, full-g.seenFull)}
	w.arrivals = w.admitted + since(refused, g.seenRefused)
	w.completed = max(0, float64(w.admitted)+float64(g.seenFlight-inflight))
	g.seenFlight = inflight
	g.seen.Store(admitted)
	g.seenFull, g.seenRefused = full, refused
	g.start.Store(t)
	count, sum, sumSq := g.n.Swap(0), g.sum.Swap(0), g.sumSq.Swap(0)
	w.used = g.maxInflight.Swap(0)
	w.short = float64(sum) / float64(count)
	if count > 1 {
		// The standard error of the mean, from the sample variance (µs² to ns²).
		v := (float64(sumSq)*1e6 - float64(count)*w.short*w.short) / float64(count-1)
		w.err = math.Sqrt(max(0, v) / float64(count))
	}
	if w.short <= 0 {
		return 0, false
	}
	old := int64(g.limit)
	// A window in which goroutines waited for a CPU is the CPU guard's to answer. Its
	// latency rose with the wait. A lower limit does not shorten that wait when other
	// processes take the CPU. When this process takes it, the guard sheds for it.
	cpuBusy := false
	if g.cpu != nil {
		if g.cpu.due(now, g.window) {
			g.cpu.update(now)
		}
		cpuBusy = g.cpu.busy
	}
	g.closeLocked(w, cpuBusy)
	return int64(g.limit), int64(g.limit) != old
}

// since returns now − then for counters read without a lock. It returns 0 if a stale
// now is behind then.
func since(now, then uint64) uint64 {
	if now < then {
		return 0
	}
	return now - then
}

// closeLocked moves the limit on what window w saw; see [gradient]. A window whose
// goroutines waited for a CPU (cpuBusy) does not lower it. mu must be held.
func (g *gradient) closeLocked(w window, cpuBusy bool) {
	// A window enters the baseline at its mean plus its standard error, and is judged
	// at its mean less it. Over noisy latencies (a database's query times), the best of
	// a hundred windows' means is far below what any concurrency achieves. Most windows
	// would then look congested. With no noise the two are the mean.
	g.recent[g.next] = w.short + w.err
	g.next = (g.next + 1) % len(g.recent)
	base := g.baselineLocked()
	g.base.Store(int64(base))
	if g.probeLimit > 0 {
		// A probe lasts two windows, the first holding work admitted before it began.
		// When it ends, its latency is in the baseline. The limit returns, and the next
		// window is judged against what the probe found.
		if w.age > probeStale*g.window {
			// Successes stopped for a while (this server's dependency failed). What the
			// probe measured is no measure of this server. Undo the probes.
			g.limit, g.probeLimit, g.probing = g.probeOrigin, 0, 0
			return
		}
		if g.probing++; g.probing < 2 {
			return
		}
		rate := float64(w.admitted) / w.age.Seconds()
		if rate >= probeHeld*g.probeRate && w.short/base <= g.tol && g.limit/2 >= g.min {
			// Half the concurrency served as much at a lower latency. This server was
			// queueing; its knee is lower still. Probe again at half of this.
			g.probeLimit, g.limit, g.probeRate, g.probing = g.limit, g.limit/2, rate, 0
			g.probeAfter = probeAfter
			return
		}
		g.limit, g.probeLimit, g.probing = g.probeLimit, 0, 0
		g.probeAfter = min(2*g.probeAfter, probeAfterMax)
		return
	}
	r := max(w.short-w.err, 0) / base
	if cpuBusy && r > g.tol {
		return
	}
	if r > clampAt*g.tol && w.used > 0 && float64(w.used) < g.limit/2 {
		// Far above the tolerance, and well under the limit (it starts at the largest).
		// Judge the limit as twice what was used, so that it comes down from there. A
		// latency within clampAt of the tolerance is left to the windows that fill half
		// the limit. A dependency twice as slow is no reason to refuse.
		g.limit = math.Max(g.min, 2*float64(w.used))
	}
	switch {
	case r <= g.tol:
		g.episodeWindows = 0
		if w.full == 0 && float64(w.used) < g.limit {
			g.elevated = 0
			return // the limit was not what bound the server
		}
		if g.elevated++; r <= probeAbove {
			g.elevated = 0
		} else if g.elevated >= g.probeAfter && g.limit/2 >= g.min {
			// Latency sits near the tolerance: is the baseline still the latency of
			// an unloaded server? Measure it at half the limit for one window.
			g.elevated = 0
			g.probeLimit, g.probeOrigin, g.limit = g.limit, g.limit, g.limit/2
			g.probeRate = float64(w.admitted) / w.age.Seconds()
			return
		}
		// Little's law: in flight = arrival rate × latency.
		need := float64(w.arrivals) / w.age.Seconds() * w.short / 1e9 * (1 + growMargin)
		factor := 2.0
		if r > 1 {
			factor = 1 + (g.tol-r)/(g.tol-1)
		}
		target := math.Min(g.limit*factor, math.Max(need, g.limit+g.headroom))
		g.limit = math.Max(g.min, math.Min(g.max, math.Max(g.limit, target)))
	case float64(w.used) >= g.limit/2:
		if g.episodeWindows == 0 {
			g.episodeLimit, g.episodeShort, g.episodeUsed, g.episodeRate = g.limit, w.short, w.used, w.completed/w.age.Seconds()
		}
		g.episodeWindows++
		grad := math.Max(0.5, g.tol/r)
		g.limit = math.Max(g.min, g.limit*(1-g.smoothing)+g.limit*grad*g.smoothing)
		// The test is on the requests in flight, not on the limit, and on the work
		// completed. A server queueing work of its own completes as much with fewer in
		// flight. Its latency falls later, since what completes now was admitted under
		// the old limit. One waiting on a slower dependency completes less, in
		// proportion.
		fell := float64(w.used) / float64(max(1, g.episodeUsed))
		if g.episodeWindows >= insensitiveWindows && fell <= insensitiveFall &&
			w.completed/w.age.Seconds() <= insensitiveRate*fell*g.episodeRate && w.short >= insensitiveLatency*g.episodeShort {
			// Fewer in flight did not bring the latency down: not this server's queue.
			for i := range g.recent {
				g.recent[i] = 0
			}
			g.recent[0], g.next = w.short+w.err, 1
			g.base.Store(int64(w.short + w.err))
			g.limit = math.Min(g.max, g.episodeLimit)
			g.episodeWindows = 0
		}
	}
}

// refreshCPU moves the CPU guard's share when a window has passed since it last did. A
// guard refusing most work admits little, so few windows close. The refusals keep it up
// to date, as long as no window is being closed meanwhile.
func (g *gradient) refreshCPU(now time.Time) {
	if !g.cpu.due(now, g.window) || !g.mu.TryLock() {
		return
	}
	if g.cpu.due(now, g.window) {
		g.cpu.update(now)
	}
	g.mu.Unlock()
}

// baseline returns the baseline latency, 0 until known.
func (g *gradient) baseline() time.Duration { return time.Duration(g.base.Load()) }
