package budget_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func withdrawN(b budget.Budget, n int) (allowed int) {
	for range n {
		if b.Withdraw() {
			allowed++
		}
	}
	return allowed
}

func TestRatio_AllowsAShareOfCallsPlusAFloor(t *testing.T) {
	clock := policytest.NewClock(t0)
	// 20 % of calls, plus 1/s over a 10 s window = a floor of 10 retries.
	r, err := budget.NewRatio(budget.RatioOptions{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second, Clock: clock})
	require.NoError(t, err)
	require.Equal(t, 10.0, r.Level(), "a quiet service still has the floor")
	for range 100 {
		r.Deposit()
	}
	require.Equal(t, 30.0, r.Level()) // 0.2 × 100 + 10
	require.Equal(t, 30, withdrawN(r, 50), "retries allowed of 50 asked")
	require.Equal(t, uint64(30), r.Allowed())
	require.Equal(t, uint64(20), r.Refused())
	require.Equal(t, 0.0, r.Level())

	// Calls and retries age out with the window.
	clock.Advance(10 * time.Second)
	require.Equal(t, 10.0, r.Level(), "after a whole window only the floor is left")
	require.Equal(t, 10, withdrawN(r, 20))
}

func TestRatio_SlidesBucketByBucket(t *testing.T) {
	clock := policytest.NewClock(t0)
	r := policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second, Clock: clock}))
	for range 10 {
		r.Deposit() // second 0
	}
	clock.Advance(5 * time.Second)
	for range 5 {
		r.Deposit() // second 5
	}
	require.Equal(t, 15.0, r.Level())
	clock.Advance(5 * time.Second) // second 10: the first 10 calls have aged out
	require.Equal(t, 5.0, r.Level())
	clock.Advance(5 * time.Second)
	require.Equal(t, 0.0, r.Level(), "no floor, no calls")
	require.False(t, r.Withdraw())
}

func TestNewRatio_Validation(t *testing.T) {
	tests := []struct {
		o   budget.RatioOptions
		msg string
	}{
		{budget.RatioOptions{Ratio: 1.5}, "Ratio is 1.5"},
		{budget.RatioOptions{Ratio: -0.1}, "Ratio is -0.1"},
		{budget.RatioOptions{Window: -time.Second}, "Window is -1s"},
	}
	for _, tt := range tests {
		_, err := budget.NewRatio(tt.o)
		if !errors.Is(err, budget.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("NewRatio(%+v) = %v; want ErrInvalidOptions saying %q", tt.o, err, tt.msg)
		}
	}
	r, err := budget.NewRatio(budget.RatioOptions{})
	require.NoError(t, err)
	require.Equal(t, 100.0, r.Level(), "defaults: 10/s over 10s")
}

func TestRate_FixedRatePerProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := budget.NewRate(budget.RateOptions{Limit: 2, Burst: 3}) // 2 retries/s, bursts of 3
		require.NoError(t, err)
		require.Equal(t, 3, withdrawN(r, 10), "the burst")
		time.Sleep(time.Second)
		require.Equal(t, 2, withdrawN(r, 10), "one second refills 2")
		require.Equal(t, uint64(5), r.Allowed())
		require.Equal(t, uint64(15), r.Refused())
	})
	for _, bad := range []struct {
		r     float64
		burst int
		field string
	}{{0, 1, "Limit is 0"}, {-1, 1, "Limit is -1"}, {1, 0, "Burst is 0"}} {
		if _, err := budget.NewRate(budget.RateOptions{Limit: rateLimit(bad.r), Burst: bad.burst}); !errors.Is(err, budget.ErrInvalidOptions) ||
			!strings.Contains(err.Error(), bad.field) {
			t.Errorf("NewRate(%v, %d) = %v; want ErrInvalidOptions saying %q", bad.r, bad.burst, err, bad.field)
		}
	}
}

func TestRate_UsesTheClockSeam(t *testing.T) {
	clock := policytest.NewClock(t0)
	r, err := budget.NewRate(budget.RateOptions{Limit: 2, Burst: 3, Clock: clock})
	require.NoError(t, err)
	require.Equal(t, 3, withdrawN(r, 10), "the burst")
	require.Equal(t, 0.0, r.Level())
	clock.Advance(time.Second)
	require.Equal(t, 2.0, r.Level(), "one fake second refills 2")
	require.Equal(t, 2, withdrawN(r, 10))
}

// TestRatio_ClockBefore1970: a clock that reads before the Unix epoch (a fake one, or
// a wall clock stepped back) neither panics nor loses the window.
func TestRatio_ClockBefore1970(t *testing.T) {
	clock := policytest.NewClock(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))
	r := policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second, Clock: clock}))
	for range 4 {
		r.Deposit()
	}
	require.Equal(t, 2, withdrawN(r, 2))
	require.Equal(t, 2.0, r.Level()) // 4 calls − 2 retries
	clock.Advance(10 * time.Second)
	require.Equal(t, 0.0, r.Level(), "the calls aged out")
}

// TestBudget_ExhaustedMeansOneAttempt runs a real pipeline: with the bucket drained to
// its threshold, Wrap(budget, retry) makes one attempt and gives up with ErrBudget.
func TestBudget_ExhaustedMeansOneAttempt(t *testing.T) {
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 4, TokenRatio: 0.1}))
	b.OnFailure()
	b.OnFailure() // 2 tokens: 2 > 2 is false
	clock := policytest.NewClock(t0).AutoAdvance(true)
	var suppressed []string
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 5, Clock: clock})))).
		With(policy.Observe(event.ObserverFunc(func(e event.Event) {
			if e.Kind == event.RetrySuppressed {
				suppressed = append(suppressed, e.Reason)
			}
		})))
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error {
		calls++
		return fault.Retryable(errors.New("unavailable"))
	})
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, retry.ErrBudget)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, retry.ErrBudget, re.Cause)
	require.Equal(t, []string{event.SuppressedBudget}, suppressed)
	require.Equal(t, 1.0, b.Tokens(), "the failed attempt cost a token")
}

// TestBudget_FadesRetriesInAnOutage: 100 calls against a dead dependency, 4 attempts
// each, with the default-sized A6 bucket: retries stop once the bucket reaches half.
func TestBudget_FadesRetriesInAnOutage(t *testing.T) {
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 4, Clock: clock}))))
	attempts := 0
	for range 100 {
		_ = p.Do(context.Background(), func(context.Context) error { attempts++; return fault.Retryable(errors.New("down")) })
	}
	// Call 1 makes 4 attempts (tokens 10 → 6); call 2's failure reaches the threshold
	// (5 > 5 is false), and from then on every call makes one attempt: 4 + 99 = 103
	// attempts, not 400.
	require.Equal(t, 103, attempts)
	require.Equal(t, 0.0, b.Tokens())
}

func BenchmarkTokenBucket_Withdraw(b *testing.B) {
	tb := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tb.OnFailure()
			tb.Withdraw()
			tb.OnSuccess()
		}
	})
}

func BenchmarkRatio_Withdraw(b *testing.B) {
	r := policy.Must(budget.NewRatio(budget.RatioOptions{}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Deposit()
			r.Withdraw()
		}
	})
}

func TestRatio_HotPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	r := policy.Must(budget.NewRatio(budget.RatioOptions{}))
	if n := testing.AllocsPerRun(1000, func() { r.Deposit(); r.Withdraw() }); n != 0 {
		t.Errorf("Ratio hot path allocates %v per call; want 0", n)
	}
}
