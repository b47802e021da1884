package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/retry"
)

// TestRetry_ARefusalIsNotABudgetFailure: an attempt a server's own protection refused
// (retry.Refused) is retried after its hint like retry.After, and the budget outside
// hears of the retry (withdraw) but not of a failure: the refusal cost the dependency
// nothing.
func TestRetry_ARefusalIsNotABudgetFailure(t *testing.T) {
	b := &budgetLog{allow: 10}
	h := newHarness(t, retry.Options{MaxAttempts: 3}, b)
	calls := 0
	err := h.p.Do(context.Background(), failing(&calls, retry.Refused(errDown, time.Second)))
	require.Equal(t, 3, calls)
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, []string{"deposit", "withdraw", "withdraw"}, b.log, "budget calls for 3 refused attempts")
	hint, ok := retry.Hint(retry.Refused(errDown, time.Second))
	require.True(t, ok)
	require.Equal(t, time.Second, hint, "a refusal's hint")
	require.NoError(t, retry.Refused(nil, time.Second), "nil in, nil out")
}
