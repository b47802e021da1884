package policyhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// TestClassifier_ABackstopRefusalCountsAgainstNoBreaker: a 503 with
// callpath.HeaderRefused is retryable after its Retry-After and excluded from a breaker's
// counts; the same 503 without it counts.
func TestClassifier_ABackstopRefusalCountsAgainstNoBreaker(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(refused string) *http.Response {
		h := http.Header{"Retry-After": {"2"}}
		if refused != "" {
			h.Set(callpath.HeaderRefused, refused)
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Header: h}
	}
	for _, tt := range []struct {
		refused  string
		excluded bool
	}{{"breaker", true}, {"limit", true}, {"dependency", true}, {"", false}} {
		err := policyhttp.DefaultClassifier(res(tt.refused), now)
		require.Equal(t, tt.excluded, breaker.DefaultIsExcluded(err), "503 with %s=%q: excluded from a breaker", callpath.HeaderRefused, tt.refused)
		hint, ok := fault.Hint(err)
		require.True(t, ok, "503 with %q carries its Retry-After", tt.refused)
		require.Equal(t, 2*time.Second, hint)
		require.True(t, retry.DefaultShouldRetry(err), "503 with %q is retryable", tt.refused)
	}

	// Through a breaker: refusals never trip it.
	b := policy.Must(breaker.New(breaker.Options{Name: "api", ConsecutiveFailures: 2}))
	p := policy.Must(policy.Wrap(b))
	for range 5 {
		err := p.Do(context.Background(), func(context.Context) error { return policyhttp.DefaultClassifier(res("breaker"), now) })
		require.False(t, errors.Is(err, breaker.ErrOpen), "a refusal from below opened the breaker: %v", err)
	}
	require.Equal(t, breaker.StateClosed, b.State())
}

// FuzzRefusedRetryAfterMillis: whatever a server sends in Backstop-Retry-After-Ms
// beside Backstop-Refused, the classifier's hint is a non-negative wait of at most a
// day, and it is the header's milliseconds when they are a plain number in range.
func FuzzRefusedRetryAfterMillis(f *testing.F) {
	for _, seed := range []string{"0", "1", "250", "86400000", "86400001", "-5", "1e3", " 7", "99999999999999999999", "", "０"} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		res := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{
			"Retry-After": {"3"}, callpath.HeaderRefused: {"breaker"}, callpath.HeaderRetryAfterMillis: {v}}}
		hint, _ := fault.Hint(policyhttp.DefaultClassifier(res, now)) // none: retry at once
		if hint < 0 || hint > 24*time.Hour {
			t.Fatalf("Backstop-Retry-After-Ms %q: hint %v outside [0, 24h]", v, hint)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err == nil && len(v) <= 12 && n <= 86_400_000 && hint != time.Duration(n)*time.Millisecond:
			t.Fatalf("Backstop-Retry-After-Ms %q: hint %v, want %d ms", v, hint, n)
		case err == nil && len(v) <= 12 && n > 86_400_000 && hint != 24*time.Hour:
			t.Fatalf("Backstop-Retry-After-Ms %q: hint %v, want a day (saturated)", v, hint)
		case (err != nil || len(v) > 12) && hint != 3*time.Second:
			t.Fatalf("Backstop-Retry-After-Ms %q (not a number): hint %v, want Retry-After's 3s", v, hint)
		}
	})
}
