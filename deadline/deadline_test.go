package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy { return must(deadline.New(deadline.Options{Timeout: time.Minute})) })
	})
	t.Run("PerAttempt", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy { return must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Minute})) })
	})
}

func must(d *deadline.Deadline, err error) *deadline.Deadline {
	if err != nil {
		panic(err)
	}
	return d
}

func TestNew_RefusesBadDurations(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := deadline.New(deadline.Options{Timeout: d}); !errors.Is(err, deadline.ErrInvalidOptions) {
			t.Errorf("New(%v) = %v; want ErrInvalidOptions", d, err)
		}
		if _, err := deadline.NewPerAttempt(deadline.Options{Timeout: d}); !errors.Is(err, deadline.ErrInvalidOptions) {
			t.Errorf("PerAttempt(%v) = %v; want ErrInvalidOptions", d, err)
		}
	}
}

func TestKinds(t *testing.T) {
	require.True(t, must(deadline.New(deadline.Options{Timeout: time.Second})).Placement().Deadline)
	require.Equal(t, policy.InsideRetry, must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})).Placement().Retry)
	require.Equal(t, time.Second, must(deadline.New(deadline.Options{Timeout: time.Second})).Limit())
}

// blockUntilDone is a fn that waits for its context and returns its error.
func blockUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestDeadline_ExceededIsDistinguishableFromCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []event.Event
		p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: 250 * time.Millisecond})))).
			With(policy.Name("db"), policy.Observe(event.ObserverFunc(func(e event.Event) { events = append(events, e) })))

		start := time.Now()
		err := p.Do(context.Background(), blockUntilDone)
		require.Equal(t, 250*time.Millisecond, time.Since(start), "the call ends when the deadline does")
		require.ErrorIs(t, err, deadline.ErrExceeded)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, deadline.ErrAttemptTimeout)
		require.NotErrorIs(t, err, context.Canceled)
		var de *deadline.Error
		require.ErrorAs(t, err, &de)
		require.Equal(t, 250*time.Millisecond, de.Limit)
		require.Equal(t, "deadline: exceeded after 250ms", err.Error())

		var exceeded []event.Event
		for _, e := range events {
			if e.Kind == event.DeadlineExceeded {
				exceeded = append(exceeded, e)
			}
		}
		require.Len(t, exceeded, 1)
		require.Equal(t, "deadline", exceeded[0].Source)
		require.Equal(t, 250*time.Millisecond, exceeded[0].Elapsed)

		// The caller's own cancellation passes through untouched.
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(100 * time.Millisecond); cancel() }()
		err = p.Do(ctx, blockUntilDone)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, deadline.ErrExceeded)

		// So does the caller's own, shorter deadline.
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err = p.Do(ctx, blockUntilDone)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, deadline.ErrExceeded, "the caller's deadline is not ours")
	})
}

func TestPerAttempt_ErrorIsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})).Bind(terminal{}, policy.Env{})
		err := r.Run(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("read: %w", ctx.Err())
		})
		require.ErrorIs(t, err, deadline.ErrAttemptTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, deadline.ErrExceeded)
		var to interface{ Timeout() bool }
		require.ErrorAs(t, err, &to)
		require.True(t, to.Timeout(), "a timed-out attempt reports Timeout() like a net.Error")
		require.Equal(t, "deadline: attempt timed out after 1s: read: context deadline exceeded", err.Error())
	})
}

func TestDeadline_SuccessAfterExpiryIsSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second}))))
		err := p.Do(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			return nil // the work finished anyway
		})
		require.NoError(t, err)
	})
}

type terminal struct{}

func (terminal) Run(ctx context.Context, fn policy.Func) error { return fn(ctx) }

func nop(context.Context) error { return nil }

func TestDeadline_SuccessPathAllocatesNoMoreThanWithTimeout(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	floor := testing.AllocsPerRun(1000, func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = nop(c)
		cancel()
	})
	p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second}))))
	got := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) })
	if got > floor {
		t.Errorf("Wrap(deadline).Do allocates %v per call; context.WithTimeout alone allocates %v", got, floor)
	}
	empty := policy.Must(policy.Wrap())
	if got := testing.AllocsPerRun(1000, func() { _ = empty.Do(ctx, nop) }); got != 0 {
		t.Errorf("Wrap().Do allocates %v per call; want 0", got)
	}
}

// TestDeadline_AnEarlierCallerDeadlineIsLeftAlone: under a caller whose deadline comes
// first, the stage makes no context of its own (nothing allocated), fn sees the
// caller's deadline, and the caller's deadline running out is not called the stage's.
func TestDeadline_AnEarlierCallerDeadlineIsLeftAlone(t *testing.T) {
	p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Hour}))))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, _ := ctx.Deadline()
	require.NoError(t, p.Do(ctx, func(c context.Context) error {
		got, ok := c.Deadline()
		require.True(t, ok)
		require.Equal(t, want, got, "the caller's deadline, not an hour")
		return nil
	}))
	if !race.Enabled {
		require.Zero(t, testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) }))
	}
	gone, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	err := p.Do(gone, func(c context.Context) error { return c.Err() })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, deadline.ErrExceeded, "the caller's deadline, not the stage's")
}

func BenchmarkPipeline_Empty(b *testing.B) {
	p := policy.Must(policy.Wrap())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, nop)
	}
}

func BenchmarkPipeline_Deadline(b *testing.B) {
	p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second}))))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, nop)
	}
}

func BenchmarkPipeline_DeadlineParallel(b *testing.B) {
	p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second}))))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			_ = p.Do(ctx, nop)
		}
	})
}

func BenchmarkWithTimeoutFloor(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = nop(c)
		cancel()
	}
}

// TestPerAttempt_UnrelatedErrorKeepsItsMeaning: an attempt that returns a
// non-timeout error just as its timer fires (a 400 answered late) is not relabelled
// a timeout, so the retry above does not retry it.
func TestPerAttempt_UnrelatedErrorKeepsItsMeaning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBadRequest := errors.New("400 bad request")
		r := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})).Bind(terminal{}, policy.Env{})
		err := r.Run(context.Background(), func(ctx context.Context) error {
			<-ctx.Done() // the timer has fired
			return errBadRequest
		})
		require.Equal(t, errBadRequest, err, "the attempt's own error comes back untouched")
		require.NotErrorIs(t, err, deadline.ErrAttemptTimeout)
		require.NotErrorIs(t, err, context.DeadlineExceeded)

		// A real timeout from the attempt's own timer is still ours.
		err = r.Run(context.Background(), func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		require.ErrorIs(t, err, deadline.ErrAttemptTimeout)
	})
}

func TestNew_FailedConstructorIsRefusedByWrap(t *testing.T) {
	d, err := deadline.New(deadline.Options{Timeout: 0})
	require.ErrorIs(t, err, deadline.ErrInvalidOptions)
	p, err := policy.Wrap(d)
	var oe *policy.OrderError
	if !errors.As(err, &oe) || oe.Rule != "O6" || p != nil {
		t.Errorf("Wrap(nil *Deadline from New(0)) = %v, %v; want an O6 refusal", p, err)
	}
}

func TestMust_PanicOnBadDurations(t *testing.T) {
	require.Panics(t, func() { policy.Must(deadline.New(deadline.Options{Timeout: 0})) })
	require.Panics(t, func() { policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: -time.Second})) })
	require.Equal(t, time.Second, policy.Must(deadline.New(deadline.Options{Timeout: time.Second})).Limit())
}

// A pipeline's deadline under a caller's earlier one: a nested call path's inner hops.
func BenchmarkPipeline_DeadlineUnderEarlierCaller(b *testing.B) {
	p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second}))))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(ctx, nop)
	}
}

// untimed reads deadline events without their times.
type untimed struct{ events []event.Event }

func (u *untimed) Observe(e event.Event) { u.events = append(u.events, e) }
func (u *untimed) Needs(k event.Kind) event.Needs {
	if k == event.DeadlineExceeded {
		return event.NeedsEvent
	}
	return event.NeedsNothing
}

func TestDeadline_AnObserverThatNeedsNoTimesGetsTheEventWithoutThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &untimed{}
		p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: time.Second})))).With(policy.Observe(obs))
		require.ErrorIs(t, p.Do(context.Background(), blockUntilDone), deadline.ErrExceeded)
		require.Len(t, obs.events, 1)
		require.Equal(t, event.DeadlineExceeded, obs.events[0].Kind)
		require.True(t, obs.events[0].Time.IsZero())
		require.Zero(t, obs.events[0].Elapsed)
	})
}

// TestDeadline_OneAttemptBoundedInsideNeedsNoContext: an overall deadline over a retry
// and a shorter per-attempt timeout, under a retry owner upstream (one attempt), makes
// no context of its own — the attempt sees the per-attempt deadline, and the pipeline
// allocates what it does without the overall deadline — yet an attempt that times out
// is still this deadline's, as it is under its context.
func TestDeadline_OneAttemptBoundedInsideNeedsNoContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))
		p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), rt, must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))))
		owned := callpath.WithUpstreamAttempt(context.Background(), 1)
		start := time.Now()
		require.NoError(t, p.Do(owned, func(c context.Context) error {
			got, ok := c.Deadline()
			require.True(t, ok)
			require.Equal(t, start.Add(time.Second), got, "the per-attempt deadline")
			return nil
		}))
		err := p.Do(owned, blockUntilDone)
		require.NotErrorIs(t, err, deadline.ErrExceeded, "the attempt's timeout, with a second of the call's left, as under its own context")
		require.ErrorIs(t, err, deadline.ErrAttemptTimeout)
		require.Equal(t, start.Add(time.Second), time.Now(), "ended by the per-attempt timeout")
		if !race.Enabled {
			inner := policy.Must(policy.Wrap(rt, must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))))
			want := testing.AllocsPerRun(100, func() { _ = inner.Do(owned, nop) })
			if got := testing.AllocsPerRun(100, func() { _ = p.Do(owned, nop) }); got != want {
				t.Errorf("Wrap(deadline, retry, per-attempt).Do under an owner allocates %v; without the deadline %v", got, want)
			}
		}
		// Not owned, the retry may make more attempts: the deadline's own context
		// bounds them, and the retry gives up on a second that could not finish in it.
		begin := time.Now()
		err = p.Do(context.Background(), func(c context.Context) error {
			got, _ := c.Deadline()
			require.Equal(t, begin.Add(time.Second), got, "the per-attempt deadline, the sooner")
			return blockUntilDone(c)
		})
		require.ErrorIs(t, err, deadline.ErrExceeded)
		require.ErrorIs(t, err, retry.ErrDeadline)
	})
}

// passThrough is a third-party stage (KindOther): it might wait, for all a deadline
// outside it knows.
type passThrough struct{}

func (passThrough) Placement() policy.Placement {
	return policy.Placement{Kind: "pass_through", Free: true}
}
func (passThrough) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// TestDeadline_AnUnknownStageBetweenKeepsTheContext: with a stage between the deadline
// and the per-attempt timeout that might wait outside the attempt, the deadline makes
// its context even for one attempt.
func TestDeadline_AnUnknownStageBetweenKeepsTheContext(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	owned := callpath.WithUpstreamAttempt(context.Background(), 1)
	rt, per := policy.Must(retry.New(retry.Options{MaxAttempts: 3})), must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second}))
	without := policy.Must(policy.Wrap(passThrough{}, rt, per))
	with := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), passThrough{}, rt, per))
	want := testing.AllocsPerRun(100, func() { _ = without.Do(owned, nop) })
	if got := testing.AllocsPerRun(100, func() { _ = with.Do(owned, nop) }); got <= want {
		t.Errorf("Wrap(deadline, other, per-attempt).Do allocates %v; without the deadline %v; want more (its own context)", got, want)
	}
}

// TestDeadline_AttemptsThatTimeOutAreNotTheCallsDeadline: a retry that runs out of
// attempts, each ended by its per-attempt timeout, well inside the call's deadline,
// returns the attempts' timeout: not ErrExceeded, and no deadline event from the
// overall deadline. The same calls through a hedge.
func TestDeadline_AttemptsThatTimeOutAreNotTheCallsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, owner := range []policy.Policy{
			policy.Must(retry.New(retry.Options{MaxAttempts: 2})),
			policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: 150 * time.Millisecond})),
		} {
			var mu sync.Mutex // a hedge's attempts report from their own goroutines
			var sources []string
			obs := event.ObserverFunc(func(e event.Event) {
				if e.Kind == event.DeadlineExceeded {
					mu.Lock()
					sources = append(sources, e.Source)
					mu.Unlock()
				}
			})
			p := policy.Must(policy.Wrap(must(deadline.New(deadline.Options{Timeout: 5 * time.Second})), owner, must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * time.Millisecond})), policy.Observe(obs)))
			start := time.Now()
			err := p.Do(context.Background(), blockUntilDone)
			require.Less(t, time.Since(start), time.Second, "%v: ended by the attempts' timeouts", owner.Placement().Kind)
			require.ErrorIs(t, err, deadline.ErrAttemptTimeout, "%v", owner.Placement().Kind)
			require.NotErrorIs(t, err, deadline.ErrExceeded, "%v: 4.6 s of the call's 5 s were left", owner.Placement().Kind)
			mu.Lock()
			require.NotContains(t, sources, deadline.Kind, "%v: %v", owner.Placement().Kind, sources)
			mu.Unlock()
		}
	})
}
