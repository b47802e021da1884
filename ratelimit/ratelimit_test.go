package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func nop(context.Context) error { return nil }

func TestConformance(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy { return policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1e6})) })
	})
	t.Run("wait, starved", func(t *testing.T) {
		// One token a minute: every call but the first is refused (past its deadline)
		// or waits, and must still honour its context.
		policytest.Run(t, func() policy.Policy {
			return policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1.0 / 60, Burst: 1, MaxWait: time.Millisecond}))
		})
	})
	t.Run("refuse", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			return policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1, Burst: 1, Mode: ratelimit.Refuse}))
		})
	})
}

func TestNew_RefusesBadOptionsNamingTheField(t *testing.T) {
	for _, tt := range []struct {
		name  string
		o     ratelimit.Options
		field string
	}{
		{"", ratelimit.Options{Rate: 1}, "name is empty"},
		{"api", ratelimit.Options{}, "Rate is 0"},
		{"api", ratelimit.Options{Rate: math.Inf(1)}, "Rate is +Inf"},
		{"api", ratelimit.Options{Rate: math.NaN()}, "Rate is NaN"},
		{"api", ratelimit.Options{Rate: 1, Burst: -1}, "Burst is -1"},
		{"api", ratelimit.Options{Rate: 1, Mode: 7}, "Mode is mode(7)"},
		{"api", ratelimit.Options{Rate: 1, MaxWait: -1}, "MaxWait is -1ns"},
		{"api", ratelimit.Options{Rate: 1, Mode: ratelimit.Refuse, MaxWait: time.Second}, "MaxWait is 1s in Refuse mode"},
	} {
		tt.o.Name = tt.name
		_, err := ratelimit.New(tt.o)
		require.ErrorIs(t, err, ratelimit.ErrInvalidOptions, "New(%q, %+v)", tt.name, tt.o)
		require.ErrorContains(t, err, tt.field, "New(%q, %+v)", tt.name, tt.o)
	}
}

func TestLimiter_BurstIsOneSecondsWorthByDefault(t *testing.T) {
	clock := policytest.NewClock(t0)
	l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 2.5, Mode: ratelimit.Refuse, Clock: clock}))
	require.Equal(t, 3.0, l.Tokens(), "Burst 0 is ⌈2.5⌉ = 3, and the bucket starts full")
	l = policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 0.1, Mode: ratelimit.Refuse, Clock: clock}))
	require.Equal(t, 1.0, l.Tokens(), "at least 1")
}

func TestLimiter_RefuseModeRefusesAtOnceWithWhenTheNextTokenComes(t *testing.T) {
	clock := policytest.NewClock(t0)
	l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 2, Mode: ratelimit.Refuse, Clock: clock}))
	var events []event.Event
	p := policy.Must(policy.Wrap(l, policy.Name("orders"), policy.Observe(event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.Rejected {
			events = append(events, e)
		}
	}))))
	require.NoError(t, p.Do(context.Background(), nop)) // tokens 1
	require.NoError(t, p.Do(context.Background(), nop)) // tokens 0

	ran := false
	err := p.Do(context.Background(), func(context.Context) error { ran = true; return nil })
	require.False(t, ran)
	require.ErrorIs(t, err, ratelimit.ErrLimited)
	require.ErrorIs(t, err, policy.ErrRejected)
	var rej *policy.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, &policy.RejectError{Policy: ratelimit.Kind, Name: "api", Reason: ratelimit.ReasonNoToken,
		RetryAfter: 100 * time.Millisecond, Err: ratelimit.ErrLimited}, rej, "10 a second: the next token in 100ms")
	require.Equal(t, "rate_limit api: rejected (no_token); retry after 100ms", err.Error())
	require.Equal(t, 0.0, l.Tokens(), "the refused call's reservation was given back")
	require.Len(t, events, 1)
	require.Equal(t, event.Event{Kind: event.Rejected, Pipeline: "orders", Stage: ratelimit.Kind, Source: "api", Time: t0,
		Reason: ratelimit.ReasonNoToken, Delay: 100 * time.Millisecond, Err: err, Context: events[0].Context}, events[0])

	clock.Advance(100 * time.Millisecond)
	require.NoError(t, p.Do(context.Background(), nop), "100ms later a token is back")
	require.Equal(t, uint64(1), l.Refused())
}

func TestLimiter_WaitModeWaitsForItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 1}))
		var waited []time.Duration
		p := policy.Must(policy.Wrap(l, policy.Observe(event.ObserverFunc(func(e event.Event) {
			switch e.Kind {
			case event.Waited:
				require.Equal(t, ratelimit.Kind, e.Stage)
				require.Equal(t, "api", e.Source)
				waited = append(waited, e.Delay)
			case event.Rejected:
				t.Errorf("a call with no deadline was refused: %v", e.Err)
			}
		}))))
		start := time.Now()
		for range 3 {
			require.NoError(t, p.Do(context.Background(), nop))
		}
		require.Equal(t, 200*time.Millisecond, time.Since(start), "three calls at 10 a second, burst 1: 0, 100ms, 200ms")
		require.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}, waited)
		require.Equal(t, uint64(2), l.Waited())
	})
}

func TestLimiter_NeverWaitsPastTheDeadlineAndGivesTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 1}))
		p := policy.Must(policy.Wrap(l))
		require.NoError(t, p.Do(context.Background(), nop)) // the bucket is empty: next token in 100ms

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := p.Do(ctx, nop)
		require.Zero(t, time.Since(start), "a token due after the deadline is refused at once, not waited for")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.ErrorIs(t, err, policy.ErrRejected)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, ratelimit.ReasonDeadline, rej.Reason)
		require.Equal(t, 100*time.Millisecond, rej.RetryAfter)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the deadline has not passed: the token would come after it")

		// The refused call took nothing: the next call waits 100ms, not 200ms.
		start = time.Now()
		require.NoError(t, p.Do(context.Background(), nop))
		require.Equal(t, 100*time.Millisecond, time.Since(start))
	})
}

func TestLimiter_MaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 1, MaxWait: 150 * time.Millisecond}))
		p := policy.Must(policy.Wrap(l))
		require.NoError(t, p.Do(context.Background(), nop))
		waiting := make(chan error, 1)
		go func() { waiting <- p.Do(context.Background(), nop) }() // its token in 100ms
		synctest.Wait()
		// This one's token would come in 200ms, after MaxWait: refused now.
		err := p.Do(context.Background(), nop)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, ratelimit.ReasonWaitLimit, rej.Reason)
		require.Equal(t, 200*time.Millisecond, rej.RetryAfter)
		require.NoError(t, <-waiting)
	})
}

func TestLimiter_CancelledWaitGivesTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 1}))
		p := policy.Must(policy.Wrap(l))
		require.NoError(t, p.Do(context.Background(), nop))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Do(ctx, nop) }()
		synctest.Wait()
		time.Sleep(40 * time.Millisecond)
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, policy.ErrRejected)
		// The token it reserved (due 100ms after the start) went back: the next call
		// waits the 60ms left to it, not 160ms.
		start := time.Now()
		require.NoError(t, p.Do(context.Background(), nop))
		require.Equal(t, 60*time.Millisecond, time.Since(start))
	})
}

// selective reads only the kinds in needs.
type selective struct {
	needs map[event.Kind]event.Needs
	got   []event.Kind
}

func (o *selective) Observe(e event.Event)          { o.got = append(o.got, e.Kind) }
func (o *selective) Needs(k event.Kind) event.Needs { return o.needs[k] }

func TestLimiter_ReportsOnlyTheKindsItsObserverNeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			kind event.Kind
			want []event.Kind
		}{
			{event.Waited, []event.Kind{event.Waited}},
			{event.Rejected, []event.Kind{event.Rejected}},
		} {
			obs := &selective{needs: map[event.Kind]event.Needs{tt.kind: event.NeedsEvent}}
			l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 1}))
			p := policy.Must(policy.Wrap(l, policy.Observe(obs)))
			require.NoError(t, p.Do(context.Background(), nop)) // the one token
			require.NoError(t, p.Do(context.Background(), nop)) // waits 100ms: event.Waited
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			require.ErrorIs(t, p.Do(ctx, nop), ratelimit.ErrLimited) // its token in 100ms: event.Rejected
			cancel()
			require.Equal(t, tt.want, obs.got, "an observer that needs only %v", tt.kind)
		}
	})
}

func TestLimiter_PublishesTokens(t *testing.T) {
	clock := policytest.NewClock(t0)
	l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 10, Burst: 4, Mode: ratelimit.Refuse, Clock: clock}))
	var pub policy.Publisher = l
	require.Equal(t, "api", pub.Name())
	gs := pub.Gauges()
	require.Len(t, gs, 1)
	require.Equal(t, "tokens", gs[0].Name)
	require.NotEmpty(t, gs[0].Help)
	require.Equal(t, 4.0, gs[0].Value(), "the bucket starts full")
	p := policy.Must(policy.Wrap(l))
	require.NoError(t, p.Do(context.Background(), nop))
	require.NoError(t, p.Do(context.Background(), nop))
	require.Equal(t, 2.0, gs[0].Value(), "tokens 2 = 4 − 2 calls")
	clock.Advance(50 * time.Millisecond)
	require.InDelta(t, 2.5, gs[0].Value(), 1e-9, "tokens 2.5 = 2 + 10/s × 50ms")
	require.Equal(t, gs[0].Value(), l.Tokens())
}

func TestLimiter_InsideTheRetryRetriesSpendTokens(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 0.001, Burst: 2, Mode: ratelimit.Refuse, Clock: clock}))
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 5, Clock: clock})), l))
	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error { attempts++; return fault.Retryable(errors.New("503")) })
	require.Equal(t, 2, attempts, "two tokens: two attempts; the third attempt is refused")
	require.ErrorIs(t, err, ratelimit.ErrLimited)
}

func TestRegistry_OneLimiterPerName(t *testing.T) {
	clock := policytest.NewClock(t0)
	var reg ratelimit.Registry
	o := ratelimit.Options{Name: "api", Rate: 1, Burst: 1, Mode: ratelimit.Refuse, Clock: clock}
	a, err := reg.Get(o)
	require.NoError(t, err)
	b, err := reg.Get(o)
	require.NoError(t, err)
	require.Same(t, a, b, "the same name: the same limiter")

	pa, pb := policy.Must(policy.Wrap(a, policy.Name("a"))), policy.Must(policy.Wrap(b, policy.Name("b")))
	require.NoError(t, pa.Do(context.Background(), nop))
	require.ErrorIs(t, pb.Do(context.Background(), nop), ratelimit.ErrLimited, "pipeline b finds the token a took gone")

	_, err = reg.Get(ratelimit.Options{Name: "api", Rate: 2, Burst: 1, Mode: ratelimit.Refuse})
	require.ErrorIs(t, err, ratelimit.ErrInvalidOptions)
	require.ErrorContains(t, err, "already made with Rate 1")
	_, err = reg.Get(ratelimit.Options{Name: "other"})
	require.ErrorContains(t, err, "Rate is 0")
	require.Len(t, reg.Limiters(), 1)
}

func TestLimiter_SuccessPathAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1e9}))))
	ctx := context.Background()
	if got := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) }); got != 0 {
		t.Errorf("Wrap(limiter).Do with a token free allocates %v per call; want 0", got)
	}
}

func TestLimiter_Explain(t *testing.T) {
	for _, tt := range []struct {
		o              ratelimit.Options
		summary, claim string
	}{
		{ratelimit.Options{Rate: 50, Burst: 10}, `rate limiter "api": 50 a second in bursts of up to 10 (calls outside the retry, attempts inside it); a call waits for its token, never past its deadline`, "after its deadline"},
		{ratelimit.Options{Rate: 50, MaxWait: 20 * time.Millisecond}, `rate limiter "api": 50 a second in bursts of up to 50 (calls outside the retry, attempts inside it); a call waits up to 20ms for its token, never past its deadline`, "after 20ms"},
		{ratelimit.Options{Rate: 0.5, Mode: ratelimit.Refuse}, `rate limiter "api": 0.5 a second in bursts of up to 1 (calls outside the retry, attempts inside it); refuses a call that finds no token`, "finds no token"},
	} {
		tt.o.Name = "api"
		st := policy.Must(ratelimit.New(tt.o)).ExplainStage()
		require.Equal(t, tt.summary, st.Summary)
		require.Contains(t, st.Refusal, tt.claim)
	}
}

func BenchmarkLimiter(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1e12, Burst: 1 << 30}))))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.Do(ctx, nop)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = p.Do(ctx, nop)
			}
		})
	})
}

func TestLimiter_ConcurrentCallersShareTheBurst(t *testing.T) {
	clock := policytest.NewClock(t0)
	l := policy.Must(ratelimit.New(ratelimit.Options{Name: "api", Rate: 1, Burst: 10, Mode: ratelimit.Refuse, Clock: clock}))
	p := policy.Must(policy.Wrap(l))
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				switch err := p.Do(context.Background(), nop); {
				case err == nil:
					sent.Add(1)
				case errors.Is(err, ratelimit.ErrLimited):
					refused.Add(1)
				default:
					t.Errorf("Do = %v; want nil or a refusal", err)
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(10), sent.Load(), "the clock stood still: the burst of 10, no more")
	require.Equal(t, int64(310), refused.Load())
	require.Equal(t, uint64(310), l.Refused())
}
