package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// backend is a fn whose attempts each wait for the test to answer them.
type backend struct {
	mu      sync.Mutex
	started chan int           // attempt numbers, as they start
	answer  map[int]chan error // what each attempt returns
	ended   chan int           // attempts that saw their context end
}

func newBackend() *backend {
	return &backend{started: make(chan int, 8), answer: map[int]chan error{}, ended: make(chan int, 8)}
}

func (b *backend) ch(n int) chan error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.answer[n] == nil {
		b.answer[n] = make(chan error, 1)
	}
	return b.answer[n]
}

func (b *backend) fn(ctx context.Context) error {
	n, _, _ := callpath.Attempt(ctx)
	b.started <- n
	select {
	case err := <-b.ch(n):
		return err
	case <-ctx.Done():
		b.ended <- n
		return ctx.Err()
	}
}

func TestHedge_FiresAtTheDelayFirstSuccessWinsLosersCancelled(t *testing.T) {
	clock := policytest.NewClock(t0)
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 3, Delay: 100 * time.Millisecond, Clock: clock}))
	var events []event.Event
	var mu sync.Mutex
	p := policy.Must(policy.Wrap(h)).With(policy.Observe(event.ObserverFunc(func(e event.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})))
	b := newBackend()
	done := make(chan error)
	go func() { done <- p.Do(context.Background(), b.fn) }()

	require.Equal(t, 1, <-b.started)
	clock.BlockUntil(1)
	clock.Advance(99 * time.Millisecond)
	require.Empty(t, b.started, "no hedge before the delay")
	clock.Advance(time.Millisecond)
	require.Equal(t, 2, <-b.started, "the hedge fires at the delay")
	clock.BlockUntil(1)
	clock.Advance(100 * time.Millisecond)
	require.Equal(t, 3, <-b.started)

	b.ch(2) <- nil // the second attempt answers first
	require.NoError(t, <-done)
	ended := []int{<-b.ended, <-b.ended}
	require.ElementsMatch(t, []int{1, 3}, ended, "the losers were cancelled, and the call waited for them")
	mu.Lock()
	defer mu.Unlock()
	var hedges int
	for _, e := range events {
		if e.Kind == event.RetryScheduled {
			require.Equal(t, retry.ReasonHedge, e.Reason)
			hedges++
		}
	}
	require.Equal(t, 2, hedges)
}

func TestHedge_ANonFatalFailureStartsTheNextAtOnceAFatalOneEndsTheCall(t *testing.T) {
	clock := policytest.NewClock(t0)
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 3, Delay: time.Hour, Clock: clock}))
	p := policy.Must(policy.Wrap(h))
	b := newBackend()
	done := make(chan error)
	go func() { done <- p.Do(context.Background(), b.fn) }()
	require.Equal(t, 1, <-b.started)
	b.ch(1) <- fault.Retryable(errDown) // non-fatal: attempt 2 at once, no hour's wait
	require.Equal(t, 2, <-b.started)
	b.ch(2) <- fault.Retryable(errDown)
	require.Equal(t, 3, <-b.started)
	b.ch(3) <- fault.Retryable(errDown)
	err := <-done
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 3, giveUp(t, err).Attempts)

	go func() { done <- p.Do(context.Background(), b.fn) }()
	require.Equal(t, 1, <-b.started)
	clock.BlockUntil(1)
	clock.Advance(time.Hour)
	require.Equal(t, 2, <-b.started)
	fatal := errors.New("400 Bad Request")
	b.ch(2) <- fatal
	err = <-done
	require.ErrorIs(t, err, retry.ErrNotRetryable)
	require.ErrorIs(t, err, fatal)
	require.Equal(t, 1, <-b.ended, "the fatal error cancelled the first attempt")
}

func TestHedge_TheBudgetPaysForEveryExtraAttempt(t *testing.T) {
	clock := policytest.NewClock(t0)
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{Tokens: 10, RetryCost: 5}))
	p := policy.Must(policy.Wrap(q, policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 5, Delay: time.Second, Clock: clock}))))
	b := newBackend()
	done := make(chan error)
	go func() { done <- p.Do(context.Background(), b.fn) }()
	require.Equal(t, 1, <-b.started)
	for want := 2; want <= 3; want++ {
		clock.BlockUntil(1)
		clock.Advance(time.Second)
		require.Equal(t, want, <-b.started)
	}
	require.Equal(t, 0, q.Tokens(), "two hedges of 5 tokens")
	clock.BlockUntil(1)
	clock.Advance(time.Second) // the quota refuses a third hedge
	b.ch(3) <- nil
	require.NoError(t, <-done)
	require.Empty(t, b.started, "no fourth attempt")
	require.Equal(t, 5, q.Tokens(), "the winner's 5 refunded; the loser's not; a call won by a hedge adds nothing more")
	require.Equal(t, uint64(1), q.Refused())
	<-b.ended
	<-b.ended
}

func TestHedge_OneAttemptUnderAnOwnerOrForWorkThatMayNotBeRepeated(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1, Clock: clock})) // all at once
	inner := policy.Must(policy.Wrap(h))
	var mu sync.Mutex
	calls := 0
	count := func(context.Context) error { mu.Lock(); calls++; mu.Unlock(); return nil }

	require.NoError(t, inner.Do(context.Background(), count))
	require.Equal(t, 2, calls, "no delay: both attempts at once, as A6's hedgingDelay of 0")

	calls = 0
	outer := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: clock}))))
	require.NoError(t, outer.Do(context.Background(), func(ctx context.Context) error { return inner.Do(ctx, count) }))
	require.Equal(t, 1, calls, "under an owner, a hedge makes one attempt")

	calls = 0
	require.NoError(t, inner.Do(callpath.WithoutRepeats(context.Background()), count))
	require.Equal(t, 1, calls, "work that may not be repeated is never hedged")
}

func TestHedge_CancelWaitsForEveryAttempt(t *testing.T) {
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: time.Second, Clock: clock}))))
	b := newBackend()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Do(ctx, b.fn) }()
	require.Equal(t, 1, <-b.started)
	clock.BlockUntil(1)
	clock.Advance(time.Second)
	require.Equal(t, 2, <-b.started)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, b.ended, 2, "both attempts had returned before Do did")
}

func TestHedge_OrderingRules(t *testing.T) {
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{}))
	_, err := policy.Wrap(h, policy.Must(retry.New(retry.Options{}))) //backstopvet:ignore wraporder (the test checks the refusal)
	require.ErrorIs(t, err, policy.ErrOrder)
	require.ErrorContains(t, err, "O2")
	_, err = policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), h, policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 100 * time.Millisecond})))
	require.NoError(t, err, "a deadline and a budget outside, a per-attempt timeout inside")
	_, err = policy.Wrap(policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: time.Second})), h) //backstopvet:ignore wraporder (the test checks the refusal)
	require.ErrorIs(t, err, policy.ErrOrder, "O3: the per-attempt timeout stands inside")
}

func TestNewHedge_RefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    retry.HedgeOptions
		want string
	}{
		{retry.HedgeOptions{MaxAttempts: 1}, "MaxAttempts is 1"},
		{retry.HedgeOptions{MaxAttempts: 6}, "MaxAttempts is 6"},
		{retry.HedgeOptions{MaxHintDelay: -1}, "MaxHintDelay is -1ns"},
	} {
		_, err := retry.NewHedge(c.o)
		require.ErrorIs(t, err, retry.ErrInvalidOptions)
		require.ErrorContains(t, err, c.want)
	}
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{}))
	require.Equal(t, 2, h.MaxAttempts())
}

func TestHedge_Conformance(t *testing.T) {
	// An hour: no hedge fires on the kit's quick successes (one attempt per call is what it checks).
	policytest.Run(t, func() policy.Policy { return policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: time.Hour})) })
}

func TestHedge_TheAttemptThatClaimsTheRaceWinsNotTheFirstToReturn(t *testing.T) {
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: time.Second, Clock: clock}))))
	ctxs := make(chan context.Context, 2)
	claimed, returnFirst := make(chan struct{}), make(chan struct{})
	ctx, rel := callpath.WithReleaser(context.Background())
	done := make(chan error)
	go func() {
		done <- p.Do(ctx, func(ctx context.Context) error {
			ctxs <- ctx
			n, _, _ := callpath.Attempt(ctx)
			if n == 1 {
				<-claimed
				require.False(t, callpath.Win(ctx), "attempt 2 claimed first")
				close(returnFirst)
				return nil // returns first, as a loser
			}
			require.True(t, callpath.Win(ctx))
			close(claimed)
			<-returnFirst
			return nil
		})
	}()
	first := <-ctxs
	clock.BlockUntil(1)
	clock.Advance(time.Second)
	second := <-ctxs
	require.NoError(t, <-done)
	require.Error(t, first.Err(), "the loser's context is cancelled")
	require.NoError(t, second.Err(), "the winner's context lives until the caller releases it")
	rel.Release()
	require.Error(t, second.Err())
	require.True(t, callpath.Win(context.Background()), "outside a hedge every attempt wins")
}

func TestHedge_APushbackDelaysTheNextAttempt(t *testing.T) {
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: time.Hour, Clock: clock}))))
	b := newBackend()
	done := make(chan error)
	go func() { done <- p.Do(context.Background(), b.fn) }()
	require.Equal(t, 1, <-b.started)
	b.ch(1) <- fault.After(errDown, 3*time.Second) // the only attempt fails: come back in 3 s
	clock.BlockUntilStarted(2)                     // the hour's timer, then the pause's
	require.Equal(t, []time.Duration{time.Hour, 3 * time.Second}, clock.Waits())
	clock.Advance(3*time.Second - time.Nanosecond)
	require.Empty(t, b.started, "not before the pause the server asked for")
	clock.Advance(time.Nanosecond)
	require.Equal(t, 2, <-b.started)
	b.ch(2) <- nil
	require.NoError(t, <-done)
}

// TestHedge_ExplainsItsWorstCase: a hedge's attempts overlap, so a call lasts at most
// its hedges' delays (and a hint each) and one attempt — not every attempt end to end.
func TestHedge_ExplainsItsWorstCase(t *testing.T) {
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: 150 * time.Millisecond, MaxHintDelay: time.Millisecond}))
	e := policy.Must(policy.Wrap(h, policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 500 * time.Millisecond})))).Explain()
	require.Equal(t, 651*time.Millisecond, e.WorstCase, "the second attempt starts by 150 ms (+1 ms of hint) and lasts 500 ms")
	require.Equal(t, "attempts", e.WorstCaseFrom)

	// With the default 30 s of hints, the deadline bounds it.
	h = policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: 150 * time.Millisecond}))
	e = policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), h, policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 500 * time.Millisecond})))).Explain()
	require.Equal(t, 2*time.Second, e.WorstCase)
	require.Equal(t, "deadline", e.WorstCaseFrom)
}
