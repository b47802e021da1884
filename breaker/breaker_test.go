package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("db down")

func must(b *breaker.Breaker, err error) *breaker.Breaker {
	if err != nil {
		panic(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return must(breaker.New(breaker.Options{Name: "db"})) })
}

func fail(context.Context) error { return errDown }
func ok(context.Context) error   { return nil }

// run calls p n times with fn and returns the errors.
func run(p *policy.Pipeline, n int, fn policy.Func) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = p.Do(context.Background(), fn)
	}
	return errs
}

func TestBreaker_StateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := must(breaker.New(breaker.Options{Name: "db", OpenJitter: -1,
			OnStateChange: func(name string, from, to breaker.State) { changes = append(changes, from.String()+"→"+to.String()) },
		}))
		r := policy.Must(policy.Wrap(b))
		start := time.Now()

		// closed → open after 5 consecutive failures.
		for i, err := range run(r, 4, fail) {
			require.ErrorIs(t, err, errDown, "failure %d passes through", i+1)
		}
		require.Equal(t, breaker.StateClosed, b.State())
		require.Equal(t, uint32(4), b.Counts().ConsecutiveFailures)
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		require.Equal(t, breaker.StateOpen, b.State())

		// open: refused at once with the time probes resume.
		calls := 0
		err := r.Do(context.Background(), func(context.Context) error { calls++; return nil })
		require.Zero(t, calls, "an open breaker does not run fn")
		require.ErrorIs(t, err, breaker.ErrOpen)
		require.ErrorIs(t, err, policy.ErrRejected)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej, "an open breaker's refusal is a policy.RejectError")
		require.Equal(t, breaker.Kind, rej.Policy)
		require.Equal(t, "db", rej.Name)
		require.Equal(t, breaker.ReasonOpen, rej.Reason)
		require.Equal(t, breaker.DefaultOpenTimeout, rej.RetryAfter, "refused at the trip: the whole open time is left")
		require.True(t, b.Snapshot(time.Now()).Until.Equal(start.Add(breaker.DefaultOpenTimeout)), "the snapshot says when the probe may go")
		require.Equal(t, "breaker db: rejected (open); retry after 750ms", err.Error())
		again := r.Do(context.Background(), ok)
		require.Same(t, rej, again, "the refusals of one instant share one error")

		time.Sleep(breaker.DefaultOpenTimeout / 4)
		require.Equal(t, breaker.DefaultOpenTimeout*3/4, openFor(b))
		require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
		require.Equal(t, 563*time.Millisecond, rej.RetryAfter, "the time left until the probe, 562.5 ms, rounded up to the millisecond")
		require.Equal(t, breaker.ReasonOpen, rej.Reason)

		// half-open once the timeout has passed.
		time.Sleep(breaker.DefaultOpenTimeout*3/4 + time.Nanosecond)
		require.Equal(t, breaker.StateHalfOpen, b.State())
		require.Zero(t, openFor(b))

		// a failed probe opens it again until an interval after the probe went out: by
		// default the interval does not grow.
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		require.Equal(t, breaker.StateOpen, b.State())
		require.Equal(t, breaker.DefaultOpenTimeout, openFor(b))

		// a successful probe closes it.
		time.Sleep(breaker.DefaultOpenTimeout + time.Nanosecond)
		require.NoError(t, r.Do(context.Background(), ok))
		require.Equal(t, breaker.StateClosed, b.State())

		require.Equal(t, []string{"closed→open", "open→half_open", "half_open→open", "open→half_open", "half_open→closed"}, changes)
	})
}

func TestBreaker_HalfOpenRefusesBeyondItsProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Second, HalfOpenProbes: 2, OpenJitter: -1}))
		r := policy.Must(policy.Wrap(b))
		_ = r.Do(context.Background(), fail)
		time.Sleep(time.Second + time.Nanosecond)

		// Two probes in flight take both slots; a third call is refused.
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = r.Do(context.Background(), func(context.Context) error { <-release; return nil })
			}()
		}
		synctest.Wait()
		err := r.Do(context.Background(), ok)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, breaker.ReasonHalfOpen, rej.Reason)
		require.Equal(t, time.Second, rej.RetryAfter, "come back once the probes have had OpenTimeout to answer")
		require.ErrorIs(t, err, breaker.ErrOpen)
		require.ErrorIs(t, err, policy.ErrRejected)
		close(release)
		wg.Wait()
		require.Equal(t, breaker.StateClosed, b.State(), "two successful probes close it")
	})
}

func TestBreaker_RatioModeOverARollingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", FailureRatio: 0.5, MinRequests: 10, Window: 10 * time.Second}))
		r := policy.Must(policy.Wrap(b))
		run(r, 6, fail) // 6 failures, 0 successes: below MinRequests
		require.Equal(t, breaker.StateClosed, b.State(), "fewer than MinRequests calls never trip")
		time.Sleep(10 * time.Second) // the failures roll out of the window
		run(r, 6, ok)
		run(r, 4, fail) // 4 of 10 = 40 %
		require.Equal(t, breaker.StateClosed, b.State(), "40 %% failures < 50 %%")
		require.Equal(t, uint32(10), b.Counts().TotalSuccesses+b.Counts().TotalFailures, "old failures left the window")
		run(r, 2, fail) // 6 of 12 = 50 %
		require.Equal(t, breaker.StateOpen, b.State())
	})
}

func TestBreaker_ExcludedErrorsDoNotCount(t *testing.T) {
	b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	r := policy.Must(policy.Wrap(b))
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("shed: %w", policy.ErrRejected),
		fault.Client(errors.New("400 Bad Request")),
		fmt.Errorf("wrapped: %w", fault.Client(errors.New("404"))),
	} {
		require.ErrorIs(t, r.Do(context.Background(), func(context.Context) error { return err }), err)
	}
	require.Equal(t, breaker.StateClosed, b.State())
	require.Equal(t, uint32(4), b.Counts().TotalExclusions)
	require.Nil(t, fault.Client(nil))
}

func TestBreaker_CallbackMayReadTheBreaker(t *testing.T) {
	var b *breaker.Breaker
	var seen []string
	b = must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1,
		OnStateChange: func(_ string, _, to breaker.State) {
			// gobreaker calls its own callback under its mutex: reading the breaker
			// from there would deadlock. Ours runs outside it.
			seen = append(seen, fmt.Sprint(to, " ", b.State(), " ", b.Counts().TotalFailures, " ", b.Snapshot(time.Now()).State))
		}}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = policy.Must(policy.Wrap(b)).Do(context.Background(), fail)
		b.ForceOpen()
		b.Reset()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a callback that reads the breaker deadlocked")
	}
	// ForceOpen on an open breaker changes no state: nothing to report.
	require.Equal(t, []string{"open open 0 open", "closed closed 0 closed"}, seen)
}

func TestBreaker_ObserverGetsStateChanges(t *testing.T) {
	var events []event.Event
	b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 2}))
	p := policy.Must(policy.Wrap(b)).With(policy.Name("orders"), policy.Observe(event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.BreakerState {
			events = append(events, e)
		}
	})))
	_ = p.Do(context.Background(), fail)
	_ = p.Do(context.Background(), fail)
	require.Len(t, events, 1)
	require.Equal(t, breaker.Kind, events[0].Stage)
	require.Equal(t, "db", events[0].Source)
	require.Equal(t, "orders", events[0].Pipeline)
	require.Equal(t, "closed", events[0].From)
	require.Equal(t, "open", events[0].To)
}

func TestBreaker_ForceOpenAndReset(t *testing.T) {
	b := must(breaker.New(breaker.Options{Name: "db"}))
	r := policy.Must(policy.Wrap(b))
	b.ForceOpen()
	err := r.Do(context.Background(), ok)
	var rej *policy.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, breaker.ReasonForced, rej.Reason)
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.Equal(t, "breaker db: rejected (forced); retry after 750ms", err.Error())
	require.Equal(t, breaker.StateOpen, b.State())
	require.Equal(t, breaker.DefaultMaxOpenTimeout, openFor(b), "forced open: the longest it would stay open")
	require.Equal(t, breaker.DefaultMaxOpenTimeout, rej.RetryAfter, "the forced refusal says so too")
	b.Reset()
	require.NoError(t, r.Do(context.Background(), ok))
	require.Equal(t, breaker.StateClosed, b.State())

	run(r, 5, fail)
	require.Equal(t, breaker.StateOpen, b.State())
	b.Reset()
	require.Equal(t, breaker.StateClosed, b.State(), "Reset closes a tripped breaker")
	require.Zero(t, b.Counts().TotalFailures, "with fresh counts")
}

// TestBreaker_OpenNowAgreesWithTheSnapshot: closed, tripped, forced open and reset,
// the clock-free-when-closed OpenNow answers as the snapshot taken beside it says.
func TestBreaker_OpenNowAgreesWithTheSnapshot(t *testing.T) {
	b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Hour}))
	r := policy.Must(policy.Wrap(b))
	check := func(what string, open bool) {
		t.Helper()
		d, gotOpen := b.OpenNow()
		require.Equal(t, open, gotOpen, what)
		require.Equal(t, open, b.Snapshot(time.Now()).State == breaker.StateOpen, what)
		if open {
			require.Greater(t, d, time.Hour-time.Minute, what)
			require.LessOrEqual(t, d, time.Hour+time.Hour/10, what, "the open time with its jitter (DefaultOpenJitter 0.1)")
		}
	}
	check("closed", false)
	run(r, 1, fail)
	check("tripped", true)
	b.Reset()
	check("reset", false)
	b.ForceOpen()
	check("forced", true)
	d, _ := b.OpenNow()
	require.Equal(t, time.Hour, d, "a forced breaker answers its open timeout")
}

// openFor is how long b stays open from now, 0 if it does not refuse.
func openFor(b *breaker.Breaker) time.Duration {
	d, _ := b.OpenNow()
	return d
}

// TestBreaker_OutsideRetryCountsCalls_InsideCountsAttempts: with 3 attempts per call,
// a breaker outside the retry sees one failure per call, inside it sees three.
func TestBreaker_OutsideRetryCountsCalls_InsideCountsAttempts(t *testing.T) {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	newRetry := func() *retry.Retry { return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})) }
	retryable := func(context.Context) error { return fault.Retryable(errDown) }

	outside := must(breaker.New(breaker.Options{Name: "outside", ConsecutiveFailures: 5}))
	p := policy.Must(policy.Wrap(outside, newRetry()))
	attempts := 0
	counting := func(ctx context.Context) error { attempts++; return retryable(ctx) }
	for range 4 {
		_ = p.Do(context.Background(), counting)
	}
	require.Equal(t, uint32(4), outside.Counts().ConsecutiveFailures, "outside: one count per call")
	require.Equal(t, 12, attempts)
	_ = p.Do(context.Background(), counting)
	require.Equal(t, breaker.StateOpen, outside.State())
	err := p.Do(context.Background(), counting)
	require.ErrorIs(t, err, breaker.ErrOpen, "outside: an open breaker stops the call before any attempt")
	require.Equal(t, 15, attempts)

	inside := must(breaker.New(breaker.Options{Name: "inside", ConsecutiveFailures: 5}))
	q := policy.Must(policy.Wrap(newRetry(), inside))
	attempts = 0
	_ = q.Do(context.Background(), counting)
	require.Equal(t, uint32(3), inside.Counts().ConsecutiveFailures, "inside: one count per attempt")
	err = q.Do(context.Background(), counting)
	require.Equal(t, breaker.StateOpen, inside.State())
	require.Equal(t, 5, attempts, "the second call's third attempt was refused")
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.ErrorIs(t, err, retry.ErrNotRetryable, "the retry does not retry an open breaker")
}

func TestBreaker_ConcurrentCalls(t *testing.T) {
	b := must(breaker.New(breaker.Options{Name: "db", FailureRatio: 0.9, MinRequests: 100}))
	r := policy.Must(policy.Wrap(b))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				fn := ok
				if (g+i)%4 == 0 {
					fn = fail
				}
				_ = r.Do(context.Background(), fn)
				_ = b.State()
				_ = b.Snapshot(time.Now())
			}
		}()
	}
	wg.Wait()
	c := b.Counts()
	require.Equal(t, breaker.StateClosed, b.State(), "25 %% failures never reach 90 %%")
	require.Equal(t, uint32(4000), c.TotalSuccesses+c.TotalFailures)
	require.Equal(t, uint32(1000), c.TotalFailures)
}

func TestNew_RefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    breaker.Options
		msg  string
	}{
		{"", breaker.Options{}, "name is empty"},
		{"db", breaker.Options{OpenTimeout: -time.Second}, "OpenTimeout is -1s"},
		{"db", breaker.Options{MaxOpenTimeout: -time.Second}, "MaxOpenTimeout is -1s"},
		{"db", breaker.Options{OpenTimeout: 2 * time.Second, MaxOpenTimeout: time.Second}, "MaxOpenTimeout is 1s, below OpenTimeout 2s"},
		{"db", breaker.Options{FailureRatio: 1.5}, "FailureRatio is 1.5"},
		{"db", breaker.Options{FailureRatio: -0.5}, "FailureRatio is -0.5"},
		{"db", breaker.Options{FailureRatio: 0.5, ConsecutiveFailures: 3}, "choose one way to trip"},
		{"db", breaker.Options{MinRequests: 10}, "MinRequests is set without FailureRatio"},
		{"db", breaker.Options{Window: time.Second}, "Window is set without FailureRatio"},
		{"db", breaker.Options{FailureRatio: 0.5, Window: -time.Second}, "Window is -1s"},
		{"db", breaker.Options{FailureRatio: 0.5, Buckets: -1}, "Buckets is -1"},
		{"db", breaker.Options{FailureRatio: 0.5, Window: 5, Buckets: 10}, "shorter than 10 buckets"},
		{"db", breaker.Options{SlowCall: -time.Second}, "SlowCall is -1s"},
	}
	for _, tt := range tests {
		tt.o.Name = tt.name
		_, err := breaker.New(tt.o)
		if !errors.Is(err, breaker.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("New(%q, %+v) = %v; want ErrInvalidOptions saying %q", tt.name, tt.o, err, tt.msg)
		}
	}
}

func TestBreaker_SuccessPathAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := policy.Must(policy.Wrap(must(breaker.New(breaker.Options{Name: "db"}))))
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, ok) }); n != 0 {
		t.Errorf("Wrap(breaker).Do allocates %v per call; want 0", n)
	}
}

// TestBreaker_RefusalAllocations: a refusal reuses a prebuilt error. An open breaker
// builds one once a millisecond at most; on synctest's still clock, once.
func TestBreaker_RefusalAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		open := must(breaker.New(breaker.Options{Name: "open", ConsecutiveFailures: 1}))
		forced := must(breaker.New(breaker.Options{Name: "forced"}))
		forced.ForceOpen()
		halfOpen := must(breaker.New(breaker.Options{Name: "half-open", ConsecutiveFailures: 1, OpenJitter: -1}))
		_ = policy.Must(policy.Wrap(open)).Do(ctx, fail)
		_ = policy.Must(policy.Wrap(halfOpen)).Do(ctx, fail)
		time.Sleep(breaker.DefaultOpenTimeout)
		release := make(chan struct{})
		probing := make(chan error)
		go func() {
			probing <- policy.Must(policy.Wrap(halfOpen)).Do(ctx, func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait()
		for _, tt := range []struct {
			b      *breaker.Breaker
			reason string
		}{{open, breaker.ReasonOpen}, {forced, breaker.ReasonForced}, {halfOpen, breaker.ReasonHalfOpen}} {
			p := policy.Must(policy.Wrap(tt.b))
			var rej *policy.RejectError
			require.ErrorAs(t, p.Do(ctx, ok), &rej)
			require.Equal(t, tt.reason, rej.Reason)
			if n := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, ok) }); n != 0 {
				t.Errorf("Wrap(breaker).Do refused (%s) with %v allocations per call; want 0", tt.reason, n)
			}
		}
		close(release)
		require.NoError(t, <-probing)
	})
}

func BenchmarkBreaker_Backstop(b *testing.B) {
	p := policy.Must(policy.Wrap(must(breaker.New(breaker.Options{Name: "db"}))))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, ok)
	}
}

func BenchmarkBreaker_RawGobreaker(b *testing.B) {
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "db"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, ok(ctx) })
	}
}

func BenchmarkBreaker_BackstopParallel(b *testing.B) {
	p := policy.Must(policy.Wrap(must(breaker.New(breaker.Options{Name: "db"}))))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			_ = p.Do(ctx, ok)
		}
	})
}

func BenchmarkBreaker_OpenRefusal(b *testing.B) {
	br := must(breaker.New(breaker.Options{Name: "db"}))
	br.ForceOpen()
	p := policy.Must(policy.Wrap(must(breaker.New(breaker.Options{Name: "db2", ConsecutiveFailures: 1}))))
	_ = p.Do(context.Background(), fail)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, ok)
	}
}

func TestRegistry(t *testing.T) {
	var reg breaker.Registry
	a := must(breaker.New(breaker.Options{Name: "a"}))
	b := must(breaker.New(breaker.Options{Name: "b"}))
	require.NoError(t, reg.Add(b, a))
	require.ErrorIs(t, reg.Add(must(breaker.New(breaker.Options{Name: "a"}))), breaker.ErrDuplicate)
	c := must(breaker.New(breaker.Options{Name: "c"}))
	require.ErrorIs(t, reg.Add(c, c), breaker.ErrDuplicate)
	require.Error(t, reg.Add(nil))
	require.Nil(t, reg.Get("c"), "a refused Add adds nothing")
	require.Same(t, a, reg.Get("a"))
	list := reg.List()
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Name(), "sorted by name")
}

func TestBreaker_OpenUntilAdoptsAnOpenDecidedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := must(breaker.New(breaker.Options{Name: "db", OpenJitter: -1, IsSuccessful: func(err error) bool { return true },
			OnStateChange: func(_ string, from, to breaker.State) { changes = append(changes, from.String()+"→"+to.String()) },
		}))
		r := policy.Must(policy.Wrap(b))
		until := time.Now().Add(7 * time.Second)

		b.OpenUntil(until)
		var rej *policy.RejectError
		require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
		require.Equal(t, breaker.ReasonOpen, rej.Reason)
		require.Equal(t, 7*time.Second, rej.RetryAfter, "refused until the adopted time, not after the breaker's own 750 ms")
		require.True(t, b.Snapshot(time.Now()).Until.Equal(until))
		require.Equal(t, breaker.StateOpen, b.State())
		require.Equal(t, []string{"closed→open"}, changes)

		b.OpenUntil(until.Add(-time.Second)) // shorter: nothing changes
		require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
		require.Equal(t, 7*time.Second, rej.RetryAfter)
		require.True(t, b.Snapshot(time.Now()).Until.Equal(until))

		// At until it is half-open, and one probe's success closes it, as after a trip of its own
		// (the user's IsSuccessful, which calls every error a success, did not keep the adopted trip from counting).
		time.Sleep(time.Until(until) + time.Nanosecond)
		require.Equal(t, breaker.StateHalfOpen, b.State())
		require.NoError(t, r.Do(context.Background(), ok))
		require.Equal(t, breaker.StateClosed, b.State())
		require.Equal(t, []string{"closed→open", "open→half_open", "half_open→closed"}, changes)

		// A forced breaker is left as it is; an until in the past does nothing.
		b.OpenUntil(time.Now())
		require.Equal(t, breaker.StateClosed, b.State())
		b.ForceOpen()
		b.OpenUntil(time.Now().Add(time.Second))
		require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
		require.Equal(t, breaker.ReasonForced, rej.Reason)
	})
}

func TestBreaker_OpenUntilThenAFailedProbeReopensForTheBreakersOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", OpenJitter: -1, OpenTimeout: 10 * time.Second}))
		r := policy.Must(policy.Wrap(b))
		until := time.Now().Add(time.Second)
		b.OpenUntil(until)
		time.Sleep(time.Second + time.Nanosecond)
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		var rej *policy.RejectError
		require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
		require.Equal(t, breaker.ReasonOpen, rej.Reason)
		require.Equal(t, 10*time.Second, rej.RetryAfter, "a failed probe reopens it for the breaker's own interval, as after a trip of its own")
	})
}

// TestBreaker_OpenTimeTracksTheOutage: while the dependency stays down each failed
// probe doubles the open time, up to MaxOpenTimeout; once a probe succeeds the breaker
// closes and its next trip is short again.
func TestBreaker_OpenTimeTracksTheOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: 100 * time.Millisecond,
			MaxOpenTimeout: 500 * time.Millisecond, OpenJitter: -1}))
		r := policy.Must(policy.Wrap(b))
		openFor := func() time.Duration { // the refusal's RetryAfter
			t.Helper()
			var rej *policy.RejectError
			require.ErrorAs(t, r.Do(context.Background(), ok), &rej)
			require.Equal(t, breaker.ReasonOpen, rej.Reason)
			return rej.RetryAfter
		}
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		var got []time.Duration
		for range 5 { // the dependency stays down: every probe fails
			d := openFor()
			got = append(got, d)
			time.Sleep(d + time.Nanosecond)
			require.ErrorIs(t, r.Do(context.Background(), fail), errDown, "the probe")
		}
		require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			500 * time.Millisecond, 500 * time.Millisecond}, got, "open times while the outage lasts")

		time.Sleep(openFor() + time.Nanosecond)
		require.NoError(t, r.Do(context.Background(), ok), "the probe after the dependency returned")
		require.Equal(t, breaker.StateClosed, b.State())
		require.ErrorIs(t, r.Do(context.Background(), fail), errDown)
		require.Equal(t, 100*time.Millisecond, openFor(), "the next trip starts short again")
	})
}

func TestBreaker_SlowCallsCountAsFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 3, SlowCall: time.Second, OpenJitter: -1,
			IsSuccessful: func(error) bool { return true }})) // the user's function cannot make a slow call a success
		r := policy.Must(policy.Wrap(b))
		slow := func(context.Context) error { time.Sleep(2 * time.Second); return nil }
		fast := func(context.Context) error { time.Sleep(500 * time.Millisecond); return nil }

		require.NoError(t, r.Do(context.Background(), slow), "the caller gets its success")
		require.Equal(t, uint32(1), b.Counts().ConsecutiveFailures)
		require.NoError(t, r.Do(context.Background(), fast))
		require.Equal(t, uint32(0), b.Counts().ConsecutiveFailures, "a fast success resets the run")
		for range 3 {
			require.NoError(t, r.Do(context.Background(), slow))
		}
		require.Equal(t, breaker.StateOpen, b.State(), "three slow calls in a row trip it")
		require.ErrorIs(t, r.Do(context.Background(), fast), breaker.ErrOpen)
		require.Contains(t, b.ExplainStage().Summary, "a success slower than 1s counts as a failure")
	})
}

func TestBreaker_SlowCallsInRatioMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := must(breaker.New(breaker.Options{Name: "db", FailureRatio: 0.5, MinRequests: 4, SlowCall: 100 * time.Millisecond}))
		r := policy.Must(policy.Wrap(b))
		slow := func(context.Context) error { time.Sleep(time.Second); return nil }
		require.NoError(t, r.Do(context.Background(), ok))
		require.NoError(t, r.Do(context.Background(), slow))
		require.NoError(t, r.Do(context.Background(), ok))
		require.Equal(t, breaker.StateClosed, b.State())
		require.NoError(t, r.Do(context.Background(), slow))
		require.Equal(t, breaker.StateOpen, b.State(), "2 slow of 4: the ratio of 0.5 is reached")
	})
}
