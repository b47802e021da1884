package budget_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

var errDown = errors.New("down")

func TestQuota_TheAWSStandardMode(t *testing.T) {
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
	require.Equal(t, 500, q.Tokens(), "starts full at 500")

	// 35 retries of 14 leave 10; the 36th is refused.
	for i := range 35 {
		taken, ok := q.Take("retryable")
		require.True(t, ok, "retry %d", i+1)
		require.Equal(t, int64(14), taken)
	}
	_, ok := q.Take("timeout")
	require.False(t, ok, "a timeout costs 14 too")
	require.Equal(t, 10, q.Tokens())
	// A retry after a throttling error costs 5.
	taken, ok := q.Take("throttle")
	require.True(t, ok)
	require.Equal(t, int64(5), taken)
	q.End(taken, true)
	q.OnSuccess() // the call ended with that attempt's success
	require.Equal(t, 10, q.Tokens(), "a retry whose attempt succeeds is refunded, and no more")
	taken, _ = q.Take("throttle")
	q.End(taken, false)
	require.Equal(t, 5, q.Tokens(), "a failed retry is not")

	// A call that succeeds at its first attempt adds 1.
	for range 9 {
		q.OnSuccess()
	}
	taken, ok = q.Take("network")
	require.True(t, ok)
	require.Equal(t, int64(14), taken)
	require.Equal(t, 0, q.Tokens())

	// Never above the capacity.
	full := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
	full.OnSuccess()
	full.End(14, true)
	require.Equal(t, 500, full.Tokens())
	require.Equal(t, uint64(38), q.Allowed())
	require.Equal(t, uint64(1), q.Refused())

	// The SDKs' costs before 2026: 5 a retry, 10 after a timeout.
	old := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{RetryCost: 5, TimeoutCost: 10}))
	for reason, want := range map[string]int64{"retryable": 5, "timeout": 10, "throttle": 5} {
		taken, _ := old.Take(reason)
		require.Equal(t, want, taken, reason)
	}
}

func TestQuota_ThroughARetryAnOutageCostsAboutAHundredRetries(t *testing.T) {
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{RetryCost: 5}))
	p := policy.Must(policy.Wrap(q, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: policytest.NewClock(t0).AutoAdvance(true)}))))
	attempts := 0
	down := func(context.Context) error { attempts++; return fault.Retryable(errDown) }
	for range 200 {
		_ = p.Do(context.Background(), down)
	}
	require.Equal(t, 200+100, attempts, "200 first attempts and the 100 retries 500 tokens pay for")
	require.Equal(t, uint64(100), q.Allowed())

	// The service is back. The empty bucket allows no retry until successes refill it:
	// each successful call adds 1.
	ok := func(context.Context) error { return nil }
	for range 10 {
		require.NoError(t, p.Do(context.Background(), ok))
	}
	require.Equal(t, 10, q.Tokens())
	// A retry that succeeds is refunded: a call that fails once then succeeds leaves 1 more.
	n := 0
	flaky := func(context.Context) error {
		n++
		if n%2 == 1 {
			return fault.Retryable(errDown)
		}
		return nil
	}
	for range 10 {
		require.NoError(t, p.Do(context.Background(), flaky))
	}
	require.Equal(t, 10, q.Tokens(), "calls that needed a retry add nothing: the retries that made them were refunded")
}

func TestNewRetryQuota_RefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    budget.RetryQuotaOptions
		want string
	}{
		{budget.RetryQuotaOptions{Tokens: -1}, "Tokens is -1"},
		{budget.RetryQuotaOptions{RetryCost: -5}, "RetryCost is -5"},
		{budget.RetryQuotaOptions{TimeoutCost: -1}, "TimeoutCost is -1"},
		{budget.RetryQuotaOptions{ThrottleCost: -1}, "ThrottleCost is -1"},
		{budget.RetryQuotaOptions{Tokens: 8}, "some retries could never be made"},
	} {
		_, err := budget.NewRetryQuota(c.o)
		require.ErrorIs(t, err, budget.ErrInvalidOptions)
		require.ErrorContains(t, err, c.want)
	}
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{SuccessGain: -1}))
	_, _ = q.Take("")
	q.OnSuccess()
	require.Equal(t, 486, q.Tokens(), "a negative SuccessGain adds nothing")
}

func TestInFlight_CapsRetriesInFlight(t *testing.T) {
	inner := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
	f := policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: inner, Max: 2}))
	a, ok := f.Take("retryable")
	require.True(t, ok)
	_, ok = f.Take("timeout")
	require.True(t, ok)
	_, ok = f.Take("retryable")
	require.False(t, ok, "two in flight: the third waits for none, it is refused")
	require.Equal(t, 2, f.InFlight())
	require.Equal(t, uint64(1), f.Capped())
	require.Equal(t, 0.0, f.Level())
	f.End(a, true)
	require.Equal(t, 1, f.InFlight())
	require.Equal(t, 485, inner.Tokens(), "the wrapped quota was told: 14 refunded of 28 taken, less the 1 the call's success adds")
	_, ok = f.Take("retryable")
	require.True(t, ok)
	require.Equal(t, uint64(1), f.Refused())
}

func TestInFlight_ThroughARetryUnderConcurrentCalls(t *testing.T) {
	// Ten calls fail once and retry; a retry's attempt holds until the test lets it
	// go. Three retries take the three places; the other seven are refused.
	f := policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 1})), Max: 3}))
	p := policy.Must(policy.Wrap(f, policy.Must(retry.New(retry.Options{MaxAttempts: 2, Base: 1}))))
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	results := make(chan error, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			first := true
			results <- p.Do(context.Background(), func(context.Context) error {
				if first {
					first = false
					return fault.Retryable(errDown)
				}
				started <- struct{}{}
				<-release
				return nil
			})
		})
	}
	inFlight, refused := 0, 0
	for inFlight < 3 || refused < 7 {
		select {
		case <-started:
			if inFlight++; inFlight > 3 {
				t.Fatalf("a fourth retry started (%d capped)", f.Capped())
			}
		case err := <-results:
			require.ErrorIs(t, err, retry.ErrBudget)
			refused++
		}
	}
	require.Equal(t, 3, f.InFlight())
	require.Equal(t, uint64(7), f.Capped())
	close(release)
	wg.Wait()
	for range 3 {
		require.NoError(t, <-results)
	}
	require.Equal(t, 0, f.InFlight(), "every place freed")
}

func TestNewInFlight_RefusesBadInput(t *testing.T) {
	_, err := budget.NewInFlight(budget.InFlightOptions{Budget: nil, Max: 1})
	require.ErrorIs(t, err, budget.ErrInvalidOptions)
	_, err = budget.NewInFlight(budget.InFlightOptions{Budget: policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})), Max: 0})
	require.ErrorContains(t, err, "InFlightOptions.Max is 0")
}

// TestQuota_ThroughARetryAThrottledRetryCostsFive: a retry reports an error marked
// fault.Throttled — hint or not — as reason "throttle", which the quota prices at 5.
func TestQuota_ThroughARetryAThrottledRetryCostsFive(t *testing.T) {
	for _, mark := range []func(error) error{
		fault.Throttled,
		func(err error) error { return fault.After(fault.Throttled(err), time.Millisecond) },
		func(err error) error { return fault.Pushback(fault.Throttled(err), time.Millisecond) },
	} {
		q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
		p := policy.Must(policy.Wrap(q, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: policytest.NewClock(t0).AutoAdvance(true)}))))
		_ = p.Do(context.Background(), func(context.Context) error { return mark(errDown) })
		require.Equal(t, 500-2*5, q.Tokens(), "two retries after throttling errors, 5 each")
	}
}
