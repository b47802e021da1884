package shed_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

// server is a synthetic server on the fake clock: each round, demand requests arrive
// at once; those the shedder admits run together and take latency(admitted).
type server struct {
	t       *testing.T
	s       *shed.Shedder
	clock   *policytest.Clock
	latency func(inflight int) time.Duration

	// Per-round history, for the assertions.
	at       []time.Duration // since the start
	limits   []int
	admitted []int
	refused  []int
	took     []time.Duration
	start    time.Time
}

func newServer(t *testing.T, o shed.Options, latency func(int) time.Duration) *server {
	clock := policytest.NewClock(t0)
	o.Clock, o.Queue.Max = clock, -1
	if o.Limit.Fixed == 0 && o.Limit.SchedLatency == 0 {
		// The rounds model runs no goroutines: the runtime's scheduling latency is the
		// test binary's, not the model's. The gradient alone is under test.
		o.Limit.SchedLatency = shed.SchedLatencyOff
	}
	return &server{t: t, s: policy.Must(shed.New(o)), clock: clock, latency: latency, start: clock.Now()}
}

// round offers demand requests at once and runs the admitted ones.
func (v *server) round(demand int) {
	v.t.Helper()
	permits := make([]shed.Permit, 0, demand)
	for range demand {
		if p, why := v.s.Admit(context.Background(), shed.PriorityDefault); why == shed.ReasonNone {
			permits = append(permits, p)
		}
	}
	took := v.latency(len(permits))
	v.at = append(v.at, v.clock.Now().Sub(v.start))
	v.limits = append(v.limits, v.s.Limit())
	v.admitted = append(v.admitted, len(permits))
	v.refused = append(v.refused, demand-len(permits))
	v.took = append(v.took, took)
	v.clock.Advance(took)
	for _, p := range permits {
		p.Release()
	}
}

// runRate offers requests at rate per second for d: the demand of a round is the
// concurrency Little's law gives at the latency of the round before.
func (v *server) runRate(rate float64, d time.Duration) {
	v.t.Helper()
	end := v.clock.Now().Add(d)
	for v.clock.Now().Before(end) {
		prev := v.latency(v.s.Limit())
		if n := len(v.took); n > 0 {
			prev = v.took[n-1]
		}
		v.round(max(1, int(rate*prev.Seconds()+0.5)))
	}
}

// since returns the index of the first round at or after d.
func (v *server) since(d time.Duration) int {
	i, _ := slices.BinarySearch(v.at, d)
	return i
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

func flat(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// knee is a server of workers that each take service: beyond workers in flight,
// requests queue and latency grows with them.
func knee(workers int, service time.Duration) func(int) time.Duration {
	return func(n int) time.Duration {
		return service * time.Duration(max(n, workers)) / time.Duration(workers)
	}
}

// TestLimit_FlatLatencyFollowsDemandUpFast: latency that stays flat as concurrency
// grows is a server with room. The default limit starts at the largest and nothing
// brings it down: 5 000 requests/s of 20 ms (100 in flight) are refused nothing from
// the first request. Started at 20 instead, the limit reaches the 100 within a second
// and then refuses nothing.
func TestLimit_FlatLatencyFollowsDemandUpFast(t *testing.T) {
	v := newServer(t, shed.Options{}, flat(20*time.Millisecond))
	v.runRate(5000, 10*time.Second)
	require.Zero(t, sum(v.refused), "refusals of a healthy server at the default limit, from the first request")
	require.Equal(t, shed.DefaultMaxLimit, slices.Min(v.limits), "the default limit came down with latency flat")

	v = newServer(t, shed.Options{Limit: shed.LimitOptions{Initial: 20}}, flat(20*time.Millisecond))
	v.runRate(5000, 10*time.Second)
	first := v.since(time.Second)
	require.GreaterOrEqual(t, v.limits[first], 100, "limit 1s into 5000/s of 20ms (need 100 in flight); limits %v", v.limits[:first+1])
	require.Zero(t, sum(v.refused[first:]), "refusals after the first second")
	require.LessOrEqual(t, slices.Max(v.limits), 250, "the limit stays near what the load needs (125 with its margin)")
}

// quietStart offers one request at a time for a window's samples: the light traffic
// in which a server, before a surge, shows the latency of its unloaded work. The
// rounds model otherwise runs the whole surge from the first request, which no limit
// started at the largest could tell from a server that is slow at any concurrency.
func (v *server) quietStart() {
	for v.clock.Now().Sub(v.start) < 2*shed.DefaultWindow {
		v.round(1)
	}
}

// TestLimit_KneeConvergesNearTheWorkersAndHoldsGoodput: a server of 8 workers of 10 ms
// offered 200 in flight (25× what it serves). The limit comes down to near 8 — the
// latency of admitted work within 2× of an unloaded server's — and stays there, while
// the workers stay busy.
func TestLimit_KneeConvergesNearTheWorkersAndHoldsGoodput(t *testing.T) {
	v := newServer(t, shed.Options{}, knee(8, 10*time.Millisecond))
	v.quietStart()
	for v.clock.Now().Sub(v.start) < 10*time.Second {
		v.round(200)
	}
	from := v.since(5 * time.Second)
	limits := slices.Clone(v.limits[from:])
	slices.Sort(limits)
	require.GreaterOrEqual(t, limits[len(limits)/2], 8, "median limit of the last 5 s")
	require.LessOrEqual(t, limits[len(limits)/2], 16, "median limit of the last 5 s")
	require.LessOrEqual(t, limits[len(limits)*9/10], 24, "90th percentile of the limit in the last 5 s: no oscillation")

	var busy, took time.Duration
	var served int
	for i := from; i < len(v.took); i++ {
		took += v.took[i]
		served += v.admitted[i]
		busy += time.Duration(min(v.admitted[i], 8)) * v.took[i] / 8
	}
	mean := took / time.Duration(len(v.took)-from)
	require.LessOrEqual(t, mean, 20*time.Millisecond, "mean latency of admitted work in the last 5 s (unloaded: 10ms)")
	require.GreaterOrEqual(t, float64(busy)/float64(took), 0.9, "share of the workers kept busy in the last 5 s")
}

// TestLimit_OneCoreFarPastItsKneeFindsIt: a CPU-bound server on one core (one worker
// of 1 ms) offered 60 in flight at once. Each probe that halves the limit and keeps
// the throughput halves it again, so the limit comes down from 20 to the knee within
// 2.5 s and stays near it: admitted work waits little more than an unloaded server's
// 1 ms, and the worker stays busy.
func TestLimit_OneCoreFarPastItsKneeFindsIt(t *testing.T) {
	v := newServer(t, shed.Options{}, knee(1, time.Millisecond))
	v.quietStart()
	for v.clock.Now().Sub(v.start) < 10*time.Second {
		v.round(60)
	}
	found := slices.IndexFunc(v.limits, func(l int) bool { return l <= 3 })
	require.GreaterOrEqual(t, found, 0, "the limit never came down to 3; limits %v", v.limits)
	require.LessOrEqual(t, v.at[found], 2500*time.Millisecond, "when the limit first reached 3")
	from := v.since(5 * time.Second)
	limits := slices.Clone(v.limits[from:])
	slices.Sort(limits)
	require.LessOrEqual(t, limits[len(limits)*9/10], 3, "90th percentile of the limit in the last 5 s")
	var took time.Duration
	for i := from; i < len(v.took); i++ {
		took += v.took[i]
	}
	mean := took / time.Duration(len(v.took)-from)
	require.LessOrEqual(t, mean, 2*time.Millisecond, "mean latency of admitted work in the last 5 s (unloaded: 1ms)")
	require.GreaterOrEqual(t, sum(v.admitted[from:]), int(0.9*float64((10*time.Second-v.at[from])/time.Millisecond)),
		"admitted in the last 5 s: the worker kept ≥ 90 % busy")
}

// TestLimit_AStepTheLimitDoesNotCauseIsFollowedBothWays: at 2 500 requests/s the
// handler goes from 20 ms to 40 ms for 5 s and back — a slower dependency, which
// fewer requests in flight do not speed up. Little's law now asks for 100 in flight
// instead of 50: within 2 s of each step the shedder refuses nothing.
func TestLimit_AStepTheLimitDoesNotCauseIsFollowedBothWays(t *testing.T) {
	slow := false
	v := newServer(t, shed.Options{}, func(int) time.Duration {
		if slow {
			return 40 * time.Millisecond
		}
		return 20 * time.Millisecond
	})
	v.runRate(2500, 5*time.Second)
	slow = true
	v.runRate(2500, 5*time.Second)
	slow = false
	v.runRate(2500, 5*time.Second)
	for _, phase := range []struct {
		name     string
		from, to time.Duration
	}{{"before", 2 * time.Second, 5 * time.Second}, {"slow", 7 * time.Second, 10 * time.Second}, {"after", 12 * time.Second, 15 * time.Second}} {
		got := sum(v.refused[v.since(phase.from):v.since(phase.to)])
		require.Zero(t, got, "refusals %s the step, %v–%v; limits %v", phase.name, phase.from, phase.to,
			v.limits[v.since(phase.from-2*time.Second):v.since(phase.to)])
	}
}

// TestLimit_NoisyFlatLatencyDoesNotCollapse: the same flat server with latency that
// varies ±30 % round to round keeps its limit above the load's need.
func TestLimit_NoisyFlatLatencyDoesNotCollapse(t *testing.T) {
	noise := rand.New(rand.NewPCG(7, 7))
	v := newServer(t, shed.Options{}, func(int) time.Duration {
		return time.Duration(float64(20*time.Millisecond) * (0.7 + 0.6*noise.Float64()))
	})
	v.runRate(3000, 10*time.Second)
	from := v.since(2 * time.Second)
	refused, offered := sum(v.refused[from:]), sum(v.refused[from:])+sum(v.admitted[from:])
	require.LessOrEqual(t, float64(refused), 0.01*float64(offered), "refused %d of %d after the first 2 s", refused, offered)
}

// pool is a server of workers on the fake clock, stepped a millisecond at a time:
// requests arrive (Poisson at rate, and burst at once at the start), the shedder
// admits or refuses each, and the admitted wait for a worker in order; each takes
// service() of a worker.
type pool struct {
	workers int
	service func() time.Duration
	rate    float64
	burst   int
	limit   shed.LimitOptions
}

// poolRun is what a pool saw after its first 2 s.
type poolRun struct {
	latencies        []time.Duration // of the work admitted, sorted
	refused, offered int
	lowest, highest  int // limits
	finalLimit       int
}

func (p pool) run(t *testing.T, seed uint64, d time.Duration) poolRun {
	t.Helper()
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Clock: clock, Queue: shed.QueueOptions{Max: -1}, Limit: p.limit}))
	const step, settle = time.Millisecond, 2 * time.Second
	type job struct {
		p    shed.Permit
		at   time.Duration
		done time.Duration
	}
	var queue, running []*job
	r := poolRun{lowest: math.MaxInt}
	arrivals := rand.New(rand.NewPCG(seed, 4))
	offer := func(now time.Duration) {
		if now >= settle {
			r.offered++
		}
		if pm, why := s.Admit(context.Background(), shed.PriorityDefault); why == shed.ReasonNone {
			queue = append(queue, &job{p: pm, at: now})
		} else if now >= settle {
			r.refused++
		}
	}
	for range p.burst {
		offer(0)
	}
	next := time.Duration(0)
	for now := time.Duration(0); now < d; now += step {
		for next <= now {
			offer(now)
			next += time.Duration(arrivals.ExpFloat64() / p.rate * float64(time.Second))
		}
		kept := running[:0]
		for _, j := range running {
			if j.done > now {
				kept = append(kept, j)
				continue
			}
			j.p.Release()
			if j.at >= settle {
				r.latencies = append(r.latencies, now-j.at)
			}
		}
		running = kept
		for len(running) < p.workers && len(queue) > 0 {
			j := queue[0]
			queue = queue[1:]
			j.done = now + max(step, p.service())
			running = append(running, j)
		}
		clock.Advance(step)
		if now >= settle {
			r.lowest, r.highest = min(r.lowest, s.Limit()), max(r.highest, s.Limit())
		}
	}
	slices.Sort(r.latencies)
	r.finalLimit = s.Limit()
	return r
}

// TestLimit_ABacklogDrainingIsNotADependencySlowdown: a server of 4 workers of 25 ms
// (160 requests/s) starts with 200 requests queued behind its workers — a burst
// admitted under a high limit, as when a dependency returns and the retries held
// back meet it — and then serves 120 requests/s, 75 % of what it can. The limit comes
// down, but the queue it admitted takes a while to drain, and until it has, latency
// stays high whatever the limit: that is no slow-down of a dependency (the server
// completes as much with fewer in flight), so the baseline must not become the
// queue's latency and the limit must not return to where it began. After 2 s the
// limit is far below the 200 and the latency of admitted work near a worker's 25 ms.
func TestLimit_ABacklogDrainingIsNotADependencySlowdown(t *testing.T) {
	const service = 25 * time.Millisecond
	r := pool{workers: 4, service: func() time.Duration { return service }, rate: 120, burst: 200,
		limit: shed.LimitOptions{Initial: 200}}.run(t, 3, 10*time.Second)
	require.LessOrEqual(t, r.highest, 50, "the highest limit after 2 s: the queue it admitted has drained, and the limit stays far below the 200 it began at (Little's law asks for 3)")
	require.LessOrEqual(t, r.latencies[len(r.latencies)*9/10], 4*service, "90th percentile latency of the work admitted after 2 s (a worker: %v)", service)
	require.LessOrEqual(t, float64(r.refused), 0.05*float64(r.offered), "refused after 2 s, of %d offered", r.offered)
}

// TestLimit_NoisyServiceTimesAreNoCongestion: a database of 4 workers whose query
// times are drawn from an exponential distribution (mean 25 ms: 160 requests/s),
// offered 100 requests/s (62 %). Requests wait for a worker now and then — the
// latency of a window of ten varies by a third about its mean — but nothing
// concurrency would cure: the limit stays near the workers or above, and with no
// queue in front of the limit (Queue.Max −1) the shedder refuses at most 5 % — the
// bursts of Poisson arrivals (0.8–3.2 % over seeds 1–5). Judged against the best
// window mean of the last hundred, most windows looked congested and the limit fell to
// one in flight, refusing 20–58 % of the load.
func TestLimit_NoisyServiceTimesAreNoCongestion(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		times := rand.New(rand.NewPCG(seed, 9))
		r := pool{workers: 4, rate: 100, service: func() time.Duration {
			return time.Duration(times.ExpFloat64() * float64(25*time.Millisecond))
		}}.run(t, seed, 20*time.Second)
		require.LessOrEqual(t, float64(r.refused), 0.05*float64(r.offered), "seed %d: refused after 2 s, of %d offered (lowest limit %d)", seed, r.offered, r.lowest)
		require.GreaterOrEqual(t, r.lowest, 3, "seed %d: the lowest limit after 2 s, in front of 4 workers", seed)
	}
}
