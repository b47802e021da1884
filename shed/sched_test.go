package shed

import (
	"context"
	"math"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/jitter"

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

// cpuModel is one CPU in front of a shedder, on the fake clock: requests queue for it
// (as goroutines runnable) before they reach the shedder; refusing one costs it
// refuseCost, serving one work. The guard reads the queue, and the wait of the
// request at its head as the scheduling latency.
type cpuModel struct {
	s            *Shedder
	clock        *policytest.Clock
	queue        []time.Time // arrival times of the requests waiting for the CPU
	work         time.Duration
	refuseCost   time.Duration
	served, seen int
	cpuRefused   int
	maxWait      time.Duration
}

func newCPUModel(t *testing.T) *cpuModel {
	t.Helper()
	m := &cpuModel{clock: policytest.NewClock(time.Unix(1e9, 0)), work: time.Millisecond, refuseCost: 50 * time.Microsecond}
	m.s = policy.Must(New(Options{Clock: m.clock, Rand: jitter.Seeded(5, 6), Queue: QueueOptions{Max: -1}}))
	m.s.adaptive.cpu.read = func() (time.Duration, uint64) {
		if len(m.queue) == 0 {
			return 0, 1
		}
		return m.clock.Now().Sub(m.queue[0]), uint64(len(m.queue))
	}
	m.s.adaptive.cpu.queue = func() (uint64, int) { return uint64(len(m.queue)), 1 }
	return m
}

// run offers perMS requests a millisecond for d, and lets the CPU work through the
// queue a millisecond at a time, priority p for every request.
func (m *cpuModel) run(d time.Duration, perMS float64, p Priority) {
	ctx := context.Background()
	owed, last := 0.0, m.clock.Now()
	for end := m.clock.Now().Add(d); m.clock.Now().Before(end); {
		now := m.clock.Now()
		for owed += perMS * float64(now.Sub(last)) / float64(time.Millisecond); owed >= 1; owed-- {
			m.queue = append(m.queue, now)
		}
		last = now
		if len(m.queue) == 0 {
			m.clock.Advance(time.Millisecond)
			continue
		}
		m.maxWait = max(m.maxWait, now.Sub(m.queue[0]))
		m.queue = m.queue[1:]
		m.seen++
		permit, why := m.s.Admit(ctx, p)
		if why != ReasonNone {
			if why == ReasonCPU {
				m.cpuRefused++
			}
			m.clock.Advance(m.refuseCost)
			continue
		}
		m.clock.Advance(m.work)
		permit.Release()
		m.served++
	}
}

func (m *cpuModel) reset() { m.served, m.seen, m.cpuRefused, m.maxWait = 0, 0, 0, 0 }

// TestSchedLatency_PacesACPUBoundServer: a server whose one CPU serves a request a
// millisecond, offered three, queues them before they reach the shedder. The guard
// sees the queue, refuses about two thirds, keeps serving at least 85 % of what the
// CPU can, and keeps the wait short; once the load falls under what the CPU serves it
// refuses nothing; critical work is never refused.
func TestSchedLatency_PacesACPUBoundServer(t *testing.T) {
	m := newCPUModel(t)
	m.run(time.Second, 0.5, PriorityDefault) // a second at half the capacity: nothing to refuse
	if m.cpuRefused != 0 {
		t.Fatalf("%d refused at half the CPU's capacity; want none", m.cpuRefused)
	}
	m.run(2*time.Second, 3, PriorityDefault) // the guard finds the level
	m.reset()
	m.run(5*time.Second, 3, PriorityDefault)
	goodput := float64(m.served) / 5000 // of the CPU's 1 000 a second
	share := float64(m.cpuRefused) / float64(m.seen)
	t.Logf("offered 3× the CPU: served %.0f %% of its capacity, refused %.0f %% of what reached the shedder, longest wait %v",
		goodput*100, share*100, m.maxWait)
	if goodput < 0.85 {
		t.Errorf("served %.0f %% of the CPU's capacity offered 3× it; want ≥ 85 %%", goodput*100)
	}
	if m.maxWait > time.Second {
		t.Errorf("a request waited %v for the CPU; want the queue kept under a second", m.maxWait)
	}
	m.reset()
	m.run(time.Second, 3, PriorityCritical)
	if m.cpuRefused != 0 {
		t.Errorf("critical work refused %d times while the CPU is saturated; want none", m.cpuRefused)
	}
	m.run(2*time.Second, 0.5, PriorityDefault) // the load falls: the queue drains
	m.reset()
	m.run(2*time.Second, 0.5, PriorityDefault)
	if m.cpuRefused != 0 {
		t.Errorf("%d refused 2 s after the load fell to half the CPU's capacity; want none", m.cpuRefused)
	}
	if got := m.s.Stats().Rejected[ReasonCPU]; got == 0 {
		t.Errorf("Stats().Rejected[cpu] = 0; want the refusals counted")
	}
}

// TestSchedLatency_BusyNeighboursAreNotThisServersQueue: goroutines wait 50 ms for a
// CPU that other processes hold, but few of this process's goroutines wait: the
// guard refuses nothing.
func TestSchedLatency_BusyNeighboursAreNotThisServersQueue(t *testing.T) {
	m := newCPUModel(t)
	m.s.adaptive.cpu.read = func() (time.Duration, uint64) { return 50 * time.Millisecond, 100 }
	m.s.adaptive.cpu.queue = func() (uint64, int) { return 3, 1 }
	m.run(3*time.Second, 0.8, PriorityDefault)
	if m.cpuRefused != 0 {
		t.Errorf("%d refused while other processes hold the CPU and the server keeps up; want none", m.cpuRefused)
	}
}

// The guard is on by default at DefaultSchedLatency, and SchedLatencyOff turns it off.
func TestSchedLatency_OnByDefaultAndOff(t *testing.T) {
	if s := policy.Must(New(Options{})); s.adaptive.cpu == nil || s.adaptive.cpu.target != DefaultSchedLatency {
		t.Errorf("a zero Options' shedder does not watch the CPUs at %v; want it on by default", DefaultSchedLatency)
	}
	if s := policy.Must(New(Options{Limit: LimitOptions{SchedLatency: SchedLatencyOff}})); s.adaptive.cpu != nil {
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
	s := policy.Must(New(Options{Clock: clock, Rand: jitter.Seeded(1, 2), Queue: QueueOptions{Max: -1}}))
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
