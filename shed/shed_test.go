package shed_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/shed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type pinned float64

func (p pinned) Float64() float64 { return float64(p) }

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { s := policy.Must(shed.New(shed.Options{})); return s })
}

func TestNew_RefusesBadOptions(t *testing.T) {
	tests := []struct {
		o   shed.Options
		msg string
	}{
		{shed.Options{Limit: shed.LimitOptions{Fixed: -1}}, "Limit.Fixed is -1"},
		{shed.Options{Limit: shed.LimitOptions{Min: 50, Max: 10}}, "Limit.Min is 50, above Limit.Max 10"},
		{shed.Options{Limit: shed.LimitOptions{Initial: 2000, Max: 100}}, "Limit.Initial is 2000, outside"},
		{shed.Options{Limit: shed.LimitOptions{Fixed: 8, Min: 2}}, "Limit.Fixed is 8 (a fixed limit) and Limit.Min is set"},
		{shed.Options{Limit: shed.LimitOptions{Fixed: 8, Smoothing: 0.5, Window: time.Second}}, "Limit.Smoothing, Limit.Window is set"},
		{shed.Options{Limit: shed.LimitOptions{Min: -1}}, "Limit.Min is -1"},
		{shed.Options{Limit: shed.LimitOptions{LatencySamples: -5}}, "Limit.LatencySamples is -5"},
		{shed.Options{Limit: shed.LimitOptions{Fixed: 8, LatencySamples: 64}}, "Limit.Fixed is 8 (a fixed limit) and Limit.LatencySamples is set"},
		{shed.Options{Queue: shed.QueueOptions{Target: -time.Second}}, "Queue.Target is -1s"},
		{shed.Options{Limit: shed.LimitOptions{Smoothing: 1.5}}, "Limit.Smoothing is 1.5"},
		{shed.Options{Limit: shed.LimitOptions{Tolerance: 0.5}}, "Limit.Tolerance is 0.5"},
		{shed.Options{Limit: shed.LimitOptions{Headroom: -1}}, "Limit.Headroom is -1"},
		{shed.Options{Queue: shed.QueueOptions{Target: time.Second, Interval: time.Millisecond}}, "Queue.Target is 1s, above Queue.Interval 1ms"},
		{shed.Options{SheddableShare: 2}, "SheddableShare is 2"},
		{shed.Options{Refusal: shed.RefusalOptions{Status: 500}}, "Refusal.Status is 500"},
		{shed.Options{Refusal: shed.RefusalOptions{MaxRetryAfter: time.Millisecond}}, "Refusal.MaxRetryAfter is 1ms"},
		{shed.Options{Quota: &shed.Quota{Rate: 1, Burst: 1}}, "Quota.Key is nil"},
		{shed.Options{Quota: &shed.Quota{Key: func(*http.Request) string { return "" }, Rate: 0, Burst: 1}}, "Quota.Rate is 0"},
		{shed.Options{Quota: &shed.Quota{Key: func(*http.Request) string { return "" }, Rate: 1}}, "Quota.Burst is 0"},
	}
	for _, tt := range tests {
		_, err := shed.New(tt.o)
		if !errors.Is(err, shed.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("New(%+v) = %v; want ErrInvalidOptions saying %q", tt.o, err, tt.msg)
		}
	}
}

// TestNew_DefaultsGiveWayToTheUsersRange: a default never fights a value the user
// set; it is clamped into the user's range instead.
func TestNew_DefaultsGiveWayToTheUsersRange(t *testing.T) {
	for _, tt := range []struct {
		o     shed.Options
		limit int
	}{
		{shed.Options{Limit: shed.LimitOptions{Max: 10}}, 10},     // initial: the max set
		{shed.Options{Limit: shed.LimitOptions{Min: 50}}, 1000},   // initial: the default max, above the min
		{shed.Options{Limit: shed.LimitOptions{Max: 2}}, 2},       // default min 4 lowered to the max
		{shed.Options{Limit: shed.LimitOptions{Min: 2000}}, 2000}, // default max 1000 raised to the min
		{shed.Options{Limit: shed.LimitOptions{Initial: 2000}}, 2000},
		{shed.Options{Limit: shed.LimitOptions{Initial: 2}}, 2},
		{shed.Options{Queue: shed.QueueOptions{Target: 200 * time.Millisecond}}, 1000}, // interval raised to the target
		{shed.Options{Queue: shed.QueueOptions{Interval: 2 * time.Millisecond}}, 1000}, // target lowered to the interval
	} {
		s, err := shed.New(tt.o)
		if err != nil {
			t.Errorf("New(%+v) = %v; want the defaults clamped into the range set", tt.o, err)
			continue
		}
		if s.Limit() != tt.limit {
			t.Errorf("New(%+v).Limit() = %d; want %d", tt.o, s.Limit(), tt.limit)
		}
	}
}

// round admits n permits, lets latency pass on the clock, and releases them: one
// sample window's worth of work at a steady in-flight count.
func round(t *testing.T, s *shed.Shedder, clock *policytest.Clock, n int, latency time.Duration) {
	t.Helper()
	permits := make([]shed.Permit, 0, n)
	for range n {
		p, why := s.Admit(context.Background(), shed.PriorityDefault)
		require.Equal(t, shed.ReasonNone, why, "round of %d at limit %d", n, s.Limit())
		permits = append(permits, p)
	}
	clock.Advance(latency)
	for _, p := range permits {
		p.Release()
	}
}

func TestLimit_GrowsUnderSteadyLatencyAndShrinksWhenItRisesWithConcurrency(t *testing.T) {
	clock := policytest.NewClock(t0)
	s, err := shed.New(shed.Options{Limit: shed.LimitOptions{Initial: 20, Min: 10, Max: 40, Window: 100 * time.Millisecond}, Clock: clock})
	require.NoError(t, err)

	// Steady 100ms latency with the limit in use: the limit grows, up to MaxLimit.
	prev := s.Limit()
	for range 10 {
		round(t, s, clock, s.Limit(), 100*time.Millisecond)
	}
	require.Greater(t, s.Limit(), prev, "limit after 10 good windows")
	for range 200 {
		round(t, s, clock, s.Limit(), 100*time.Millisecond)
	}
	require.Equal(t, 40, s.Limit(), "the limit stops at MaxLimit")

	// Latency now rises with the work in flight, as a server of 2 workers of 25 ms:
	// the limit shrinks, down to MinLimit, never below.
	for range 60 {
		n := s.Limit()
		round(t, s, clock, n, 25*time.Millisecond*time.Duration(max(n, 2))/2)
	}
	require.Equal(t, 10, s.Limit(), "the limit stops at MinLimit")
}

// countingClock counts the clock reads of the shedder.
type countingClock struct {
	*policytest.Clock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Clock.Now() }

// TestLimit_ABusyServerTimesASampleAndStillAdapts: once a window admits more than
// LatencySamples requests, the next ones time about LatencySamples of them (two clock
// reads each) instead of all, and the limit reacts to latency as before.
func TestLimit_ABusyServerTimesASampleAndStillAdapts(t *testing.T) {
	clock := &countingClock{Clock: policytest.NewClock(t0)}
	s := policy.Must(shed.New(shed.Options{
		Limit: shed.LimitOptions{Initial: 400, Min: 100, Max: 400, Window: 100 * time.Millisecond, LatencySamples: 20},
		Clock: clock,
		Rand:  jitter.Seeded(1, 2),
	}))
	clock.reads.Store(0)

	// A new shedder times every request until it has timed too many.
	round(t, s, clock.Clock, 400, 100*time.Millisecond)
	require.Equal(t, int64(800), clock.reads.Load(), "clock reads of the first round")
	round(t, s, clock.Clock, 400, 100*time.Millisecond)
	require.Less(t, clock.reads.Load(), int64(1000), "clock reads of two rounds: the second timed one request in 16")
	clock.reads.Store(0)
	for range 20 {
		round(t, s, clock.Clock, 400, 100*time.Millisecond)
	}
	// 20 windows × 20 samples × 2 reads = 800 expected; all requests would be 16 000.
	require.InDelta(t, 800, clock.reads.Load(), 200, "clock reads of 20 busy windows")
	require.Equal(t, 400, s.Limit(), "steady latency keeps the limit at MaxLimit")

	for range 5 { // a server whose latency is 100 ms per 133 in flight: 300 ms at 400
		n := s.Limit()
		round(t, s, clock.Clock, n, 100*time.Millisecond*time.Duration(n)/133)
	}
	require.Less(t, s.Limit(), 300, "limit after latency tripled with the work in flight, judged on samples")
}

// TestLimit_AFallInTrafficTimesMoreAgain: busy windows set a stride of about one
// request in 100; traffic falls to 10 requests a window. The first request timed after
// the fall finds its window over and short of MinSamples and lowers the stride to the
// rate since, instead of waiting ~1 000 requests for ten samples at the old stride.
func TestLimit_AFallInTrafficTimesMoreAgain(t *testing.T) {
	clock := &countingClock{Clock: policytest.NewClock(t0)}
	s := policy.Must(shed.New(shed.Options{
		Limit: shed.LimitOptions{Initial: 400, Min: 100, Max: 400, Window: 100 * time.Millisecond, LatencySamples: 4},
		Clock: clock,
		Rand:  jitter.Seeded(1, 2),
	}))
	for range 10 {
		round(t, s, clock.Clock, 400, 100*time.Millisecond)
	}
	clock.reads.Store(0)
	round(t, s, clock.Clock, 400, 100*time.Millisecond)
	require.Less(t, clock.reads.Load(), int64(40), "a busy round of 400 times ~4")

	clock.reads.Store(0)
	for range 60 {
		round(t, s, clock.Clock, 10, 100*time.Millisecond)
	}
	// At a stride of ~100, ten samples take ~1 000 requests; lowered to the rate of
	// 10 a window, the stride is 2 and about 300 of the 600 requests are timed.
	require.Greater(t, clock.reads.Load(), int64(300), "clock reads of 60 rounds of 10 requests after the fall")
}

func TestLimit_AppLimitedWindowsChangeNothing(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Initial: 20, Window: 100 * time.Millisecond}, Clock: clock}))
	for range 50 {
		round(t, s, clock, 9, 100*time.Millisecond) // 9 < 20/2 in flight
	}
	require.Equal(t, 20, s.Limit(), "a server not using half its limit learns nothing about it")
}

func TestAdmit_FixedLimitAndSheddableShare(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 4}, Queue: shed.QueueOptions{Max: -1}}))
	var held []shed.Permit
	for range 3 {
		p, why := s.Admit(context.Background(), shed.PrioritySheddable)
		require.Equal(t, shed.ReasonNone, why)
		held = append(held, p)
	}
	_, why := s.Admit(context.Background(), shed.PrioritySheddable)
	require.Equal(t, shed.ReasonPriority, why, "sheddable work may fill 75 %% of 4 = 3 slots")
	p, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why, "first attempts still get the last slot")
	held = append(held, p)
	_, why = s.Admit(context.Background(), shed.PriorityCritical)
	require.Equal(t, shed.ReasonLimit, why, "no queue: at the limit, refused")
	require.Equal(t, 4, s.InFlight())
	for _, p := range held {
		p.Release()
	}
	require.Zero(t, s.InFlight())
	st := s.Stats()
	require.Equal(t, uint64(4), st.Admitted)
	require.Equal(t, map[shed.Reason]uint64{shed.ReasonPriority: 1, shed.ReasonLimit: 1}, st.Rejected)
	shed.Permit{}.Release() // a zero permit is harmless
}

// queued starts a goroutine that asks for a slot and reports what it got.
func queued(s *shed.Shedder, ctx context.Context, p shed.Priority, name string, out chan<- string) {
	go func() {
		permit, why := s.Admit(ctx, p)
		if why == shed.ReasonNone {
			out <- name
			permit.Release()
			return
		}
		out <- name + ":" + why.String()
	}()
}

func TestQueue_FIFOThenLIFOUnderAStandingQueue(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Clock: clock}))
	holder, _ := s.Admit(context.Background(), shed.PriorityDefault)
	out := make(chan string, 10)

	// No standing queue: oldest first.
	queued(s, context.Background(), shed.PriorityDefault, "a", out)
	clock.BlockUntil(1)
	queued(s, context.Background(), shed.PriorityDefault, "b", out)
	clock.BlockUntil(2)
	holder.Release() // a is served and releases; then b
	require.Equal(t, "a", <-out)
	require.Equal(t, "b", <-out)

	// A standing queue: c waits 100ms and times out, d keeps the queue from emptying,
	// e arrives after 100ms of non-empty queue and is served before d.
	holder, _ = s.Admit(context.Background(), shed.PriorityDefault)
	queued(s, context.Background(), shed.PriorityDefault, "c", out)
	clock.BlockUntil(1)
	clock.Advance(60 * time.Millisecond)
	queued(s, context.Background(), shed.PriorityDefault, "d", out)
	clock.BlockUntil(2)
	clock.Advance(40 * time.Millisecond) // c's 100ms timeout
	require.Equal(t, "c:queue", <-out)
	clock.Advance(time.Millisecond)
	queued(s, context.Background(), shed.PriorityDefault, "e", out)
	clock.BlockUntil(2)
	holder.Release()
	require.Equal(t, "e", <-out, "the newest is served first under a standing queue")
	require.Equal(t, "d", <-out)
	require.Zero(t, s.QueueLen())
}

func TestQueue_StandingQueueShortensTheWait(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Clock: clock}))
	holder, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer holder.Release()
	out := make(chan string, 10)
	queued(s, context.Background(), shed.PriorityDefault, "a", out)
	clock.BlockUntil(1)
	clock.Advance(99 * time.Millisecond)
	queued(s, context.Background(), shed.PriorityDefault, "b", out)
	clock.BlockUntil(2)
	clock.Advance(2 * time.Millisecond) // a times out at 100ms; the queue has stood 101ms
	require.Equal(t, "a:queue", <-out)
	queued(s, context.Background(), shed.PriorityDefault, "c", out)
	clock.BlockUntil(2)
	clock.Advance(5 * time.Millisecond) // c waits only the 5ms target
	require.Equal(t, "c:queue", <-out)
	clock.Advance(100 * time.Millisecond)
	require.Equal(t, "b:queue", <-out)
	st := s.Stats()
	require.Equal(t, uint64(3), st.Rejected[shed.ReasonQueue])
}

func TestQueue_CriticalFirst(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Clock: clock}))
	holder, _ := s.Admit(context.Background(), shed.PriorityDefault)
	out := make(chan string, 10)
	queued(s, context.Background(), shed.PriorityDefault, "default", out)
	clock.BlockUntil(1)
	queued(s, context.Background(), shed.PriorityCritical, "critical", out)
	clock.BlockUntil(2)
	holder.Release()
	require.Equal(t, "critical", <-out)
	require.Equal(t, "default", <-out)
}

func TestQueue_FullDeadlineAndCancel(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: 1}, Clock: clock}))
	holder, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer holder.Release()
	out := make(chan string, 10)

	ctx, cancel := context.WithCancel(context.Background())
	queued(s, ctx, shed.PriorityDefault, "a", out)
	clock.BlockUntil(1)
	_, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonQueueFull, why)
	cancel()
	require.Equal(t, "a:canceled", <-out)

	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, why = s.Admit(past, shed.PriorityDefault)
	require.Equal(t, shed.ReasonDeadline, why, "a request whose deadline has passed is not queued")
}

func TestShedder_AsAPolicy(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Rand: pinned(0)}))
	var events []event.Event
	p := policy.Must(policy.Wrap(s)).With(policy.Name("consumer"), policy.Observe(event.ObserverFunc(func(e event.Event) { events = append(events, e) })))
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = p.Do(context.Background(), func(context.Context) error { close(started); <-release; return nil })
	}()
	<-started
	err := p.Do(context.Background(), func(context.Context) error { return nil })
	close(release)
	wg.Wait()
	require.ErrorIs(t, err, shed.ErrShed)
	require.ErrorIs(t, err, policy.ErrRejected)
	var rej *policy.RejectError
	require.ErrorAs(t, fmt.Errorf("handler: %w", err), &rej, "a shedder's refusal is a *policy.RejectError")
	require.Equal(t, shed.Kind, rej.Policy)
	require.Equal(t, "shed", rej.Name, "the default name")
	require.Equal(t, shed.ReasonLimit.String(), rej.Reason)
	require.Equal(t, "limit", rej.Reason)
	require.Equal(t, time.Second, rej.RetryAfter)
	require.Equal(t, shed.ErrShed, rej.Err)
	require.Equal(t, "shed shed: rejected (limit); retry after 1s", err.Error())

	var shedEvents []event.Event
	for _, e := range events {
		if e.Kind == event.Shed {
			shedEvents = append(shedEvents, e)
		}
	}
	require.Len(t, shedEvents, 1)
	require.Equal(t, shed.Kind, shedEvents[0].Stage)
	require.Equal(t, "limit", shedEvents[0].Reason)
	require.Equal(t, "consumer", shedEvents[0].Pipeline)

	// An idle server admits an upstream retry, even with one slot.
	ctx := callpath.WithUpstreamAttempt(context.Background(), 2)
	require.NoError(t, p.Do(ctx, func(context.Context) error { return nil }), "an idle Limit: 1 server admits a retry")
	err = p.Do(shed.WithPriority(context.Background(), shed.PriorityCritical), func(context.Context) error { return nil })
	require.NoError(t, err)
}

// TestShedder_IdleServerAdmitsARetry: the sheddable room is ⌊limit·0.75⌋ but never 0,
// so with one slot an idle server still admits a retry; shedding retries first is for
// when there is pressure (TestAdmit_FixedLimitAndSheddableShare).
func TestShedder_IdleServerAdmitsARetry(t *testing.T) {
	for _, o := range []shed.Options{{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}, {Limit: shed.LimitOptions{Min: 1, Initial: 1, Max: 1}, Queue: shed.QueueOptions{Max: -1}}} {
		s := policy.Must(shed.New(o))
		permit, why := s.Admit(context.Background(), shed.PrioritySheddable)
		require.Equal(t, shed.ReasonNone, why, "idle %+v: a retry is admitted", o)
		permit.Release()
	}
}

// TestRetryAfter_FollowsTheShareRefused: the base is the mean wait until admission
// of a client that comes back every second, 1 / (1 − share refused), from the second
// before; jitter never takes it above MaxRetryAfter; a calm second brings it back.
func TestRetryAfter_FollowsTheShareRefused(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: pinned(0), Refusal: shed.RefusalOptions{MaxRetryAfter: 8 * time.Second}}))
	require.Equal(t, time.Duration(1)*time.Second, s.RetryAfter(), "calm: 1s")
	// second plays one second of admitted requests and refusals.
	second := func(admitted, refused int) {
		holder, _ := s.Admit(context.Background(), shed.PriorityDefault)
		for range refused {
			_, why := s.Admit(context.Background(), shed.PriorityDefault)
			require.Equal(t, shed.ReasonLimit, why)
		}
		holder.Release()
		for range admitted {
			p, why := s.Admit(context.Background(), shed.PriorityDefault)
			require.Equal(t, shed.ReasonNone, why)
			p.Release()
		}
		clock.Advance(time.Second)
	}
	for _, tt := range []struct {
		admitted, refused int
		want              int
	}{
		{99, 1, 1},  // 1 % refused (+ the holder admitted): 1 / 0.99 → 1 s
		{50, 49, 2}, // half: 2 s
		{10, 89, 5}, // 90 %: 10 s, but base + ⌈base/2⌉ must fit in 8 s: 5
		{99, 1, 1},  // pressure gone: 1 s at once
		{0, 0, 1},   // calm
		{0, 100, 5}, // all refused: the highest base that fits
		{100, 0, 1}, // a second without refusals
	} {
		second(tt.admitted, tt.refused)
		require.Equal(t, time.Duration(tt.want)*time.Second, s.RetryAfter(), "after a second of %d admitted and %d refused", tt.admitted, tt.refused)
	}

	top := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock, Rand: pinned(0.9999), Refusal: shed.RefusalOptions{MaxRetryAfter: 8 * time.Second}}))
	held, _ := top.Admit(context.Background(), shed.PriorityDefault)
	for range 3 {
		for range 100 {
			_, _ = top.Admit(context.Background(), shed.PriorityDefault)
		}
		clock.Advance(time.Second)
	}
	require.Equal(t, time.Duration(8)*time.Second, top.RetryAfter(), "base 5 with the most jitter: 5 + 3 = Refusal.MaxRetryAfter, never above")
	held.Release()

	hi := policy.Must(shed.New(shed.Options{Rand: pinned(0.9999)}))
	require.Equal(t, time.Duration(2)*time.Second, hi.RetryAfter(), "base 1s, the top of [1, 2]")

	// With a real random source the values spread over [base, ⌈1.5·base⌉].
	clock2 := policytest.NewClock(t0)
	busy := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Clock: clock2, Rand: rand.New(rand.NewPCG(1, 2))}))
	held2, _ := busy.Admit(context.Background(), shed.PriorityDefault)
	defer held2.Release()
	for range 2 { // everything refused for a second: base 20 (20 + 10 = MaxRetryAfter 30 s)
		for range 1000 {
			_, _ = busy.Admit(context.Background(), shed.PriorityDefault)
		}
		clock2.Advance(time.Second)
	}
	seen := map[int]int{}
	for range 1000 {
		seen[int(busy.RetryAfter()/time.Second)]++
	}
	for v := range seen {
		require.True(t, v >= 20 && v <= 30, "Retry-After %d outside [20, 30] for base 20", v)
	}
	require.GreaterOrEqual(t, len(seen), 4, "the jitter spreads clients: %v", seen)
}

// TestShedder_EachRefusalReachesEachObserverOnce: Options.Observer and a pipeline's
// Observer both hear every refusal, through the pipeline or the middleware, once.
func TestShedder_EachRefusalReachesEachObserverOnce(t *testing.T) {
	var own, pipe atomic.Int64
	count := func(n *atomic.Int64) event.Observer {
		return event.ObserverFunc(func(e event.Event) {
			if e.Kind == event.Shed {
				n.Add(1)
			}
		})
	}
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1},
		Observer: count(&own)}))
	p := policy.Must(policy.Wrap(s)).With(policy.Observe(count(&pipe)))
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	defer held.Release()

	err := p.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, err, shed.ErrShed)
	require.Equal(t, [2]int64{1, 1}, [2]int64{own.Load(), pipe.Load()}, "through the pipeline: each, once")

	shed.Middleware(okHandler, s).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	require.Equal(t, [2]int64{2, 2}, [2]int64{own.Load(), pipe.Load()}, "through the middleware: each, once")
}

// TestQueue_IntervalFollowsTheWork: with the adaptive limit and the default interval,
// a request that finds no slot waits 20 baseline latencies of the work (at least
// 100 ms, at most 500 ms); a set Interval is kept as set. Four workers of 25 ms near their
// capacity keep a queue that drains and re-forms every few requests: refusing from it
// after 100 ms lost answers the workers had time for.
func TestQueue_IntervalFollowsTheWork(t *testing.T) {
	for _, c := range []struct {
		work     time.Duration
		interval time.Duration // Options.Queue.Interval
		want     time.Duration
	}{
		{time.Millisecond, 0, 100 * time.Millisecond},
		{10 * time.Millisecond, 0, 200 * time.Millisecond},
		{25 * time.Millisecond, 0, 500 * time.Millisecond},
		{200 * time.Millisecond, 0, 500 * time.Millisecond},
		{25 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		clock := policytest.NewClock(t0)
		s := policy.Must(shed.New(shed.Options{Clock: clock, Queue: shed.QueueOptions{Interval: c.interval}}))
		for range 40 { // a few windows of one request at a time: the baseline is the work
			p, why := s.Admit(context.Background(), shed.PriorityDefault)
			require.Equal(t, shed.ReasonNone, why)
			clock.Advance(c.work)
			p.Release()
		}
		var held []shed.Permit
		for range s.Limit() {
			p, why := s.Admit(context.Background(), shed.PriorityDefault)
			require.Equal(t, shed.ReasonNone, why)
			held = append(held, p)
		}
		out := make(chan string, 1)
		queued(s, context.Background(), shed.PriorityDefault, "a", out)
		clock.BlockUntil(1)
		waits := clock.Waits()
		require.Equal(t, c.want, waits[len(waits)-1], "the queue's wait for work of %v (Interval %v)", c.work, c.interval)
		clock.Advance(c.want)
		require.Equal(t, "a:queue", <-out)
		for _, p := range held {
			p.Release()
		}
	}
}

// TestLimit_AProbeAcrossAnOutageIsUndone: a probe halves the limit to measure the
// latency of less concurrency; the server's dependency then fails for 2 s, so no
// success is timed and the probe's window spans the outage. What it measured is no
// measure of this server: the limit returns to where the probes began, rather than
// meeting the traffic that returns with half of it (or less, had the probe judged the
// outage's trickle of successes).
func TestLimit_AProbeAcrossAnOutageIsUndone(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Initial: 20, Max: 20, Window: 100 * time.Millisecond}, Clock: clock}))
	for range 10 {
		round(t, s, clock, 20, 100*time.Millisecond)
	}
	// Latency sits within the tolerance but above the baseline, with the limit full:
	// after a few such windows the limit is halved for a probe.
	for i := 0; s.Limit() == 20; i++ {
		require.Less(t, i, 10, "no probe after %d saturated windows at 1.3× the baseline", i)
		round(t, s, clock, 20, 130*time.Millisecond)
	}
	require.Equal(t, 10, s.Limit(), "the probe's limit")
	for range 200 { // the dependency is down: every request fails at once
		p, why := s.Admit(context.Background(), shed.PriorityDefault)
		require.Equal(t, shed.ReasonNone, why)
		clock.Advance(10 * time.Millisecond)
		p.ReleaseFailed()
	}
	round(t, s, clock, s.Limit(), 100*time.Millisecond) // it is back
	require.Equal(t, 20, s.Limit(), "the limit once the first window after the outage closes")
}

// TestLimit_AProbeThatDoesNotHoldWaitsLongerForTheNext: a server whose latency sits at
// 1.3 times the baseline with its limit in use asks for a probe every third window.
// Each probe here serves half the requests at the baseline's latency — not as much —
// and so does not hold: it measured nothing the baseline did not say, and the next
// waits twice as many windows as the last (3, 6, 12, … elevated windows, after the
// one that holds the probe's work), up to 48, so that two probes stay within the 100
// windows the baseline remembers and it is still re-measured.
func TestLimit_AProbeThatDoesNotHoldWaitsLongerForTheNext(t *testing.T) {
	clock := policytest.NewClock(t0)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Initial: 20, Max: 20}, Clock: clock}))
	for range 5 {
		round(t, s, clock, s.Limit(), 100*time.Millisecond)
	}
	var gaps []int // windows at the full limit before each probe
	full := 0
	for range 600 {
		n := s.Limit()
		if n < 20 { // a probe: half the limit, at the baseline's latency
			if full > 0 {
				gaps = append(gaps, full)
			}
			full = 0
			round(t, s, clock, n, 100*time.Millisecond)
			continue
		}
		full++
		round(t, s, clock, n, 130*time.Millisecond)
	}
	require.GreaterOrEqual(t, len(gaps), 6, "probes in 600 windows: the baseline is still re-measured; gaps %v", gaps)
	require.Equal(t, []int{4, 7, 13, 25, 49, 49}, gaps[:6], "windows at the full limit before each probe")
	for _, g := range gaps[6:] {
		require.Equal(t, 49, g, "windows before a probe, at most 48 elevated ones; gaps %v", gaps)
	}
}
