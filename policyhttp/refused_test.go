package policyhttp_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// TestClassifier_ABackstopRefusalCountsAgainstNoBreaker: a 503 with
// policy.HeaderRefused is retryable after its Retry-After and excluded from a breaker's
// counts; the same 503 without it counts.
func TestClassifier_ABackstopRefusalCountsAgainstNoBreaker(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(refused string) *http.Response {
		h := http.Header{"Retry-After": {"2"}}
		if refused != "" {
			h.Set(policy.HeaderRefused, refused)
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Header: h}
	}
	for _, tt := range []struct {
		refused  string
		excluded bool
	}{{"breaker", true}, {"limit", true}, {"dependency", true}, {"", false}} {
		err := policyhttp.DefaultClassifier(res(tt.refused), now)
		require.Equal(t, tt.excluded, breaker.DefaultIsExcluded(err), "503 with %s=%q: excluded from a breaker", policy.HeaderRefused, tt.refused)
		hint, ok := retry.Hint(err)
		require.True(t, ok, "503 with %q carries its Retry-After", tt.refused)
		require.Equal(t, 2*time.Second, hint)
		require.True(t, retry.DefaultShouldRetry(err), "503 with %q is retryable", tt.refused)
	}

	// Through a breaker: refusals never trip it.
	b := breaker.MustNew("api", breaker.Options{ConsecutiveFailures: 2})
	p := policy.MustWrap(b)
	for range 5 {
		err := p.Do(context.Background(), func(context.Context) error { return policyhttp.DefaultClassifier(res("breaker"), now) })
		require.False(t, errors.Is(err, breaker.ErrOpen), "a refusal from below opened the breaker: %v", err)
	}
	require.Equal(t, breaker.StateClosed, b.State())
}
