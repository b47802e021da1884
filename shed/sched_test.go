package shed

import (
	"context"
	"math"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

func TestPercentileSince_CountsOnlyWhatTheWindowAdded(t *testing.T) {
	h := &metrics.Float64Histogram{Buckets: []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}, Counts: []uint64{10, 0, 0, 0}}
	last := make([]uint64, 4)
	d, n := percentileSince(h, last, 0.9) // 10 latencies under 1 ms
	if d != time.Millisecond || n != 10 {
		t.Errorf("percentileSince(10 under 1 ms) = %v, %d; want 1ms, 10", d, n)
	}
	h.Counts = []uint64{10 + 1, 0, 0, 9} // since: 1 under 1 ms, 9 of 100 ms or more
	d, n = percentileSince(h, last, 0.9)
	if d != math.MaxInt64 || n != 10 {
		t.Errorf("percentileSince(1 under 1 ms, 9 over 100 ms) = %v, %d; want the largest duration, 10", d, n)
	}
	d, n = percentileSince(h, last, 0.9)
	if d != 0 || n != 0 {
		t.Errorf("percentileSince(nothing new) = %v, %d; want 0, 0", d, n)
	}
}

// TestSchedLatency_RefusesWhileTheCPUsAreSaturated drives a shedder on the fake clock
// in front of a server that completes one request a millisecond, offered three: the
// handler's latency is not what is measured here — the scheduling latency says
// goroutines wait 50 ms for the CPU, and it stays so whatever is refused (a machine
// that gives the process less CPU than it asks for looks the same). The refused share
// of new work climbs, 10 points a window, to what brings the admitted work down to 90
// % of what the server completes — 1 − 0.9 × 1000 / 3000 = 70 % — and no further;
// critical work is never refused; once the wait is gone the share falls to nothing
// within a few windows.
func TestSchedLatency_RefusesWhileTheCPUsAreSaturated(t *testing.T) {
	clock := policytest.NewClock(time.Unix(1e9, 0))
	// The limit is held at 20: the guard is under test, not the limit.
	s := MustNew(Options{Clock: clock, Rand: policy.SeededRand(5, 6), Limit: LimitOptions{Max: 20, SchedLatency: 5 * time.Millisecond},
		Queue: QueueOptions{Max: -1}})
	wait := 50 * time.Millisecond
	s.adaptive.cpu.read = func() (time.Duration, uint64) { return wait, 100 }
	ctx := context.Background()
	var serving []Permit // admitted, not yet completed: the server completes one a millisecond
	// window offers three requests of priority p a millisecond for one Window and
	// returns the share the CPU guard refused.
	window := func(p Priority) float64 {
		refused, n := 0, 0
		for end := clock.Now().Add(DefaultWindow); clock.Now().Before(end); {
			for range 3 {
				n++
				permit, why := s.Admit(ctx, p)
				switch why {
				case ReasonNone:
					serving = append(serving, permit)
				case ReasonCPU:
					refused++
				}
			}
			clock.Advance(time.Millisecond)
			if len(serving) > 0 {
				serving[0].Release()
				serving = serving[1:]
			}
		}
		return float64(refused) / float64(n)
	}
	var shares []float64
	for range 14 {
		shares = append(shares, window(PriorityDefault))
	}
	t.Logf("refused shares while the wait lasts: %.2f", shares)
	for _, got := range shares[9:] {
		if got < 0.6 || got > 0.8 {
			t.Errorf("refused shares while goroutines wait 50 ms for the CPU: %.2f; want the last ones near 70 %%, the share that admits 90 %% of what the server completes", shares)
			break
		}
	}
	for k := 1; k < 8; k++ {
		if shares[k] < shares[k-1]-0.05 {
			t.Errorf("refused shares %.2f fall at window %d while the wait lasts; want them to climb", shares, k)
		}
	}
	// Held there: the guard's own refusals hold the completions down, which must not
	// lower the best it caps against (else the share creeps up window after window).
	var held []float64
	for range 600 {
		held = append(held, window(PriorityDefault))
	}
	mean := 0.0
	for k, got := range held[len(held)-50:] {
		mean += got / 50
		if got < 0.5 || got > 0.85 {
			t.Errorf("refused share %.2f at window %d of 600 more while the wait lasts; want it to stay near 70 %%", got, k+550)
		}
	}
	if mean < 0.64 || mean > 0.76 {
		t.Errorf("refused share %.2f on average over windows 550–600 of the wait; want 70 %%, neither creeping up nor down", mean)
	}
	// Sheddable work goes first (twice the share), but never past the cap: a server
	// offered only retries still serves 90 % of what it completes.
	if got := window(PrioritySheddable); got < 0.6 || got > 0.8 {
		t.Errorf("sheddable work refused at %.2f; want near 70 %%, the cap", got)
	}
	if got := window(PriorityCritical); got != 0 {
		t.Errorf("critical work refused at %.2f while the CPUs are saturated; want none", got)
	}
	wait = 0
	var after []float64
	for range 10 {
		after = append(after, window(PriorityDefault))
	}
	t.Logf("refused shares once it is gone: %.2f", after)
	if after[len(after)-1] != 0 {
		t.Errorf("refused shares once the wait is gone: %.2f; want none within 10 windows", after)
	}
	if got := s.Stats().Rejected[ReasonCPU]; got == 0 {
		t.Errorf("Stats().Rejected[cpu] = 0; want the refusals counted")
	}
	for _, p := range serving {
		p.Release()
	}
}

// The guard is on by default at DefaultSchedLatency, and SchedLatencyOff turns it off.
func TestSchedLatency_OnByDefaultAndOff(t *testing.T) {
	if s := MustNew(Options{}); s.adaptive.cpu == nil || s.adaptive.cpu.target != DefaultSchedLatency {
		t.Errorf("a zero Options' shedder does not watch the CPUs at %v; want it on by default", DefaultSchedLatency)
	}
	if s := MustNew(Options{Limit: LimitOptions{SchedLatency: SchedLatencyOff}}); s.adaptive.cpu != nil {
		t.Errorf("New(Limit.SchedLatency SchedLatencyOff) watches the CPUs; want the guard off")
	}
	if _, err := New(Options{Limit: LimitOptions{Fixed: 4, SchedLatency: time.Millisecond}}); err == nil {
		t.Errorf("New(Limit.Fixed 4, Limit.SchedLatency 1ms) = nil error; want it refused: it applies to the adaptive limit")
	}
}

// The runtime's own reader returns the latencies since its last read: after a read,
// one at once sees few or none.
func TestSchedReader_ReadsTheRuntime(t *testing.T) {
	r := newSchedReader()
	if r.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		t.Fatalf("runtime/metrics %s is %v; want a histogram", schedMetric, r.sample[0].Value.Kind())
	}
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
		<-done
	}
	if _, n := r.read(); n == 0 {
		t.Errorf("read after 100 goroutines ran: 0 latencies; want some")
	}
}

// TestSchedLatency_AWaitForTheCPUDoesNotLowerTheLimit: a handler of 20 ms whose
// latency grows 8× while goroutines wait 50 ms for a CPU (other processes take it) is
// not refused by the limit: the window is the CPU guard's to judge, and it refuses
// no more than the work that piles up.
func TestSchedLatency_AWaitForTheCPUDoesNotLowerTheLimit(t *testing.T) {
	clock := policytest.NewClock(time.Unix(1e9, 0))
	s := MustNew(Options{Clock: clock, Rand: policy.SeededRand(1, 2), Queue: QueueOptions{Max: -1}})
	wait := time.Duration(0)
	s.adaptive.cpu.read = func() (time.Duration, uint64) { return wait, 100 }
	ctx := context.Background()
	refused := 0
	// 100 requests in flight, each taking latency, for d.
	run := func(latency, d time.Duration) {
		for end := clock.Now().Add(d); clock.Now().Before(end); {
			permits := make([]Permit, 0, 100)
			for range 100 {
				p, why := s.Admit(ctx, PriorityDefault)
				if why != ReasonNone {
					refused++
					continue
				}
				permits = append(permits, p)
			}
			clock.Advance(latency)
			for _, p := range permits {
				p.Release()
			}
		}
	}
	run(20*time.Millisecond, 2*time.Second)
	wait = 50 * time.Millisecond
	run(160*time.Millisecond, 2*time.Second) // 8× the baseline: over clampAt × Tolerance
	if refused != 0 || s.Limit() != DefaultMaxLimit {
		t.Errorf("%d refused, limit %d, while the CPU is taken by others and the work keeps up; want none refused and the limit at %d",
			refused, s.Limit(), DefaultMaxLimit)
	}
	wait = 0
	run(160*time.Millisecond, 2*time.Second) // the same latency without the wait: congestion
	if s.Limit() >= DefaultMaxLimit {
		t.Errorf("limit %d after 2 s at 8× the baseline latency with no wait for a CPU; want it lowered", s.Limit())
	}
}
