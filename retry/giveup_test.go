package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
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

func TestRetry_CancelDuringSleepMatchesContextCanceled(t *testing.T) {
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: clock, Strategy: retry.None{}}))))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) }) }()
	clock.BlockUntil(1) // the loop sleeps before attempt 2
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled, "a give-up for the caller's cancellation")
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, errDown, "it still unwraps to the last attempt's error")
	require.Equal(t, policy.OutcomeCanceled, policy.Outcome(err))
}

// TestRetry_DeadlineGiveUpMatchesDeadlineExceeded: the next sleep would pass the
// overall deadline, so the retry gives up early; the error says deadline, in every
// vocabulary a caller may ask in.
func TestRetry_DeadlineGiveUpMatchesDeadlineExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 250 * ms})), policy.Must(retry.New(retry.Options{MaxAttempts: 5, Strategy: retry.None{}}))))
		calls := 0
		err := p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
		require.Equal(t, 2, calls, "attempts before the 200ms sleep would pass 250ms")
		require.ErrorIs(t, err, retry.ErrDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, deadline.ErrExceeded, "the overall deadline claims the early give-up as its own")
		require.NotErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, errDown)
		require.Equal(t, policy.OutcomeDeadline, policy.Outcome(err))
	})
}

// TestRetry_CallersDeadlineIsNotOurs: the same early give-up under the caller's own,
// shorter deadline matches context.DeadlineExceeded but not deadline.ErrExceeded.
func TestRetry_CallersDeadlineIsNotOurs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Hour})), policy.Must(retry.New(retry.Options{MaxAttempts: 5, Strategy: retry.None{}}))))
		ctx, cancel := context.WithTimeout(context.Background(), 250*ms)
		defer cancel()
		calls := 0
		err := p.Do(ctx, failing(&calls, fault.Retryable(errDown)))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, deadline.ErrExceeded)
	})
}

func TestRetry_OneAttemptRetryDoesNotClaimTheCallPath(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 3})
	single := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 1}))))
	calls := 0
	var owned bool
	err := single.Do(context.Background(), func(ctx context.Context) error {
		owned = callpath.Owned(ctx)
		return h.p.Do(ctx, failing(&calls, fault.Retryable(errDown)))
	})
	require.False(t, owned, "a retry with MaxAttempts 1 marks nothing")
	require.Equal(t, 3, calls, "the retry below it owns the call path and retries")
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Empty(t, h.of(event.RetrySuppressed))
}

// TestRetry_SharedBucketChargedOncePerFailedAttempt: nested pipelines share one A6
// bucket; the inner retry is suppressed by the owner rule and must not pay again.
func TestRetry_SharedBucketChargedOncePerFailedAttempt(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	bucket := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	outer := policy.Must(policy.Wrap(bucket, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	inner := policy.Must(policy.Wrap(bucket, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	calls := 0
	_ = outer.Do(context.Background(), func(ctx context.Context) error {
		return inner.Do(ctx, failing(&calls, fault.Retryable(errDown)))
	})
	require.Equal(t, 3, calls)
	require.Equal(t, 7.0, bucket.Tokens(), "tokens 7 = 10 − 3 failed attempts, each charged once")
}

func TestRetry_HintLongerThanMaxHintDelayGivesUp(t *testing.T) {
	h := newHarness(t, retry.Options{MaxAttempts: 3, MaxHintDelay: 5 * time.Second})
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, fault.After(errDown, time.Hour)))
	require.Equal(t, 1, calls, "no attempt before the server's hour is up")
	require.Empty(t, h.clock.Waits(), "nothing slept")
	require.ErrorIs(t, err, retry.ErrHintTooLong)
	require.ErrorIs(t, err, errDown)
	hint, ok := fault.Hint(err)
	require.True(t, ok)
	require.Equal(t, time.Hour, hint, "the server's hint is readable from the error")
	sup := h.of(event.RetrySuppressed)
	require.Len(t, sup, 1)
	require.Equal(t, event.SuppressedHint, sup[0].Reason)
}

func TestRetry_HugeHintsDoNotOverflow(t *testing.T) {
	big := time.Duration(math.MaxInt64 - 1)
	h := newHarness(t, retry.Options{MaxAttempts: 2, MaxHintDelay: math.MaxInt64, Rand: pinned(0.999)})
	calls := 0
	_ = h.p.Do(context.Background(), failing(&calls, fault.After(errDown, big)))
	require.Equal(t, []time.Duration{math.MaxInt64}, h.clock.Waits(), "hint + jitter saturates instead of wrapping negative")
	require.Equal(t, 2, calls)
}

// TestRetry_MinAttemptTime: after attempt 1 fails at 0 ms the deadline has 250 ms
// left; a retry after 100 ms would have 150 ms, less than the 200 ms an attempt needs.
func TestRetry_MinAttemptTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 250 * ms})),
			policy.Must(retry.New(retry.Options{MaxAttempts: 5, Strategy: retry.None{}, MinAttemptTime: 200 * ms}))))
		start := time.Now()
		calls := 0
		err := p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
		require.Equal(t, 1, calls, "no attempt is started that cannot finish")
		require.Equal(t, time.Duration(0), time.Since(start), "the call returns at once")
		require.ErrorIs(t, err, retry.ErrDeadline)
		require.ErrorIs(t, err, errDown)
	})
}

// TestRetry_MinAttemptTimeFromThePerAttemptTimeout: with MinAttemptTime 0 the
// per-attempt timeout inside the retry is the time an attempt needs.
func TestRetry_MinAttemptTimeFromThePerAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(o retry.Options) int {
			p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 250 * ms})), policy.Must(retry.New(o)), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * ms}))))
			calls := 0
			_ = p.Do(context.Background(), failing(&calls, fault.Retryable(errDown)))
			return calls
		}
		require.Equal(t, 1, run(retry.Options{MaxAttempts: 5, Strategy: retry.None{}}),
			"0 + 100ms sleep + 200ms attempt timeout > 250ms: no retry")
		require.Equal(t, 2, run(retry.Options{MaxAttempts: 5, Strategy: retry.None{}, MinAttemptTime: -1}),
			"negative: only the sleep must fit (100ms < 250ms; the next, 200ms, does not)")
	})
}

// FuzzStrategyDelay: every strategy's delay lies in [0, cap] for any attempt number
// up to 10^6, any previous delay and any base ≤ cap, however large.
func FuzzStrategyDelay(f *testing.F) {
	f.Add(1, int64(0), int64(100*ms), int64(5*time.Second), 0.5) // the defaults
	f.Add(1_000_000, int64(0), int64(time.Second), int64(math.MaxInt64), 0.999)
	f.Add(64, int64(math.MaxInt64/2), int64(1), int64(math.MaxInt64), 0.0)
	f.Add(30, int64(time.Hour), int64(time.Millisecond), int64(time.Millisecond), 0.7) // base = cap
	f.Fuzz(func(t *testing.T, n int, prev, base, cap int64, r float64) {
		if n < 1 || n > 1_000_000 || base <= 0 || cap < base || prev < 0 || !(r >= 0 && r < 1) {
			t.Skip()
		}
		for _, s := range []retry.Strategy{retry.Full{}, retry.Equal{}, retry.Decorrelated{}, retry.None{},
			retry.GRPC{}, retry.GRPC{Multiplier: 1}, retry.GRPC{Multiplier: 1e9}} {
			d := s.Delay(n, time.Duration(prev), time.Duration(base), time.Duration(cap), pinned(r))
			if d < 0 || d > ceilingOf(s, time.Duration(cap)) {
				t.Fatalf("%T%+v.Delay(n=%d, prev=%d, base=%d, cap=%d, rand=%v) = %d; want in [0, cap] (GRPC: 1.2·cap)", s, s, n, prev, base, cap, r, d)
			}
		}
	})
}

func TestStrategies_BoundedForHugeAttemptNumbersAndCaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	caps := []time.Duration{time.Millisecond, 5 * time.Second, math.MaxInt64 / 3, math.MaxInt64}
	for _, cap := range caps {
		for _, n := range []int{1, 2, 63, 64, 1000, 1_000_000} {
			for _, s := range []retry.Strategy{retry.Full{}, retry.Equal{}, retry.Decorrelated{}, retry.None{}, retry.GRPC{}} {
				for range 20 {
					d := s.Delay(n, cap, time.Millisecond, cap, pinned(rng.Float64()))
					if d < 0 || d > ceilingOf(s, cap) {
						t.Fatalf("%T.Delay(n=%d, cap=%v) = %v; want in [0, %v]", s, n, cap, d, ceilingOf(s, cap))
					}
				}
			}
		}
	}
}

func TestNew_TypedNilFromAFailedConstructorIsRefusedByWrap(t *testing.T) {
	r, err := retry.New(retry.Options{MaxAttempts: -1})
	require.Error(t, err)
	_, err = policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), r)
	var oe *policy.OrderError
	require.True(t, errors.As(err, &oe) && oe.Rule == "O6", "Wrap(deadline, nil *retry.Retry) = %v; want O6", err)
}

// TestRetry_Pushback: a server's pushback of d ≥ 0 is waited exactly (no backoff, no
// jitter); a negative one ends the call; both count against the budget.
func TestRetry_Pushback(t *testing.T) {
	b := &budgetLog{allow: 10}
	h := newHarness(t, retry.Options{MaxAttempts: 3, Rand: pinned(0.9)}, b)
	calls := 0
	_ = h.p.Do(context.Background(), failing(&calls, fault.Pushback(errDown, 750*ms), fault.Pushback(errDown, 0), errDown))
	require.Equal(t, 3, calls)
	require.Equal(t, []time.Duration{750 * ms}, h.clock.Waits(), "exactly the pushback; a pushback of 0 retries at once")
	sched := h.of(event.RetryScheduled)
	require.Len(t, sched, 2)
	require.Equal(t, time.Duration(0), sched[1].Delay)
	require.Equal(t, retry.ReasonHint, h.of(event.RetryScheduled)[0].Reason)

	b.log, calls = nil, 0
	err := h.p.Do(context.Background(), failing(&calls, fault.Pushback(errDown, -1)))
	require.Equal(t, 1, calls, "a negative pushback: do not retry")
	require.ErrorIs(t, err, retry.ErrNotRetryable)
	require.Equal(t, []string{"deposit", "failure"}, b.log, "it still counts as a failure for the budget")
	require.Nil(t, fault.Pushback(nil, time.Second))
}

// TestError_NotRetryableSaysHowToWidenTheAllowList: a plain error that the default
// classifier does not retry names the two ways to retry it; a refusal or an error
// marked permanent does not, since neither should be retried.
func TestError_NotRetryableSaysHowToWidenTheAllowList(t *testing.T) {
	plain := &retry.Error{Attempts: 1, Cause: retry.ErrNotRetryable, Last: errors.New("status 503")}
	if got, want := plain.Error(), "retry: 1 attempt, error not retryable (mark it with fault.Retryable, or widen Options.ShouldRetry): status 503"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	for _, last := range []error{fault.Permanent(errors.New("bad")), fmt.Errorf("shed: %w", policy.ErrRejected)} {
		e := &retry.Error{Attempts: 1, Cause: retry.ErrNotRetryable, Last: last}
		if strings.Contains(e.Error(), "fault.Retryable") {
			t.Errorf("Error() = %q for %v; want no hint to retry it", e.Error(), last)
		}
	}
}

// ceilingOf is the longest delay s may return with cap: cap, or for GRPC 1.2·cap
// (A6's jitter above maxBackoff), at most the longest Duration.
func ceilingOf(s retry.Strategy, cap time.Duration) time.Duration {
	if _, ok := s.(retry.GRPC); ok {
		if float64(cap)*1.2 >= math.MaxInt64 {
			return math.MaxInt64
		}
		return time.Duration(float64(cap) * 1.2)
	}
	return cap
}
