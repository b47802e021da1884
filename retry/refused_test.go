package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/retry"
)

// TestRetry_ARefusalIsNotABudgetFailure: an attempt a server's own protection refused
// (fault.Refused) is retried after its hint like fault.After, and the budget outside
// hears of the retry (withdraw) but not of a failure: the refusal cost the dependency
// nothing.
func TestRetry_ARefusalIsNotABudgetFailure(t *testing.T) {
	b := &budgetLog{allow: 10}
	h := newHarness(t, retry.Options{MaxAttempts: 3}, b)
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, fault.Refused(errDown, time.Second)))
	require.Equal(t, 3, calls)
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, []string{"deposit", "withdraw", "withdraw"}, b.log, "budget calls for 3 refused attempts")
	hint, ok := fault.Hint(fault.Refused(errDown, time.Second))
	require.True(t, ok)
	require.Equal(t, time.Second, hint, "a refusal's hint")
	require.NoError(t, fault.Refused(nil, time.Second), "nil in, nil out")
}

// TestRetry_UnderAnOwnerInAnotherProcessTheBudgetStillHears: a call whose retries a
// caller in another process owns makes one attempt, and its budget is told of the call
// and its failure (never asked for a retry); under an owner in this process it is told
// nothing — that owner counts.
func TestRetry_UnderAnOwnerInAnotherProcessTheBudgetStillHears(t *testing.T) {
	b := &budgetLog{allow: 10}
	h := newHarness(t, retry.Options{MaxAttempts: 3}, b)
	calls := 0
	_ = h.p.Do(callpath.WithUpstreamAttempt(context.Background(), 1), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, 1, calls)
	require.Equal(t, []string{"deposit", "failure"}, b.log, "budget calls under an owner in another process")

	b.log, calls = nil, 0
	_ = h.p.Do(callpath.WithAttempt(context.Background(), 1), failing(&calls, fault.Retryable(errDown)))
	require.Equal(t, 1, calls)
	require.Empty(t, b.log, "budget calls under an owner in this process")
}
