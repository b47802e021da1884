package awsretry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/policy/policytest"
)

// TestNewStandard_WaitsAsTheSDKs: the waits of the SDKs' standard mode (the Retry
// Behavior of 2026): retry i waits b × min(base × 2^(i−1), 20 s), base 50 ms, or 1 s
// after a throttling error; a service's X-Amz-Retry-After within [that, that + 5 s];
// a Retry-After is not read. b is pinned at 0.5.
func TestNewStandard_WaitsAsTheSDKs(t *testing.T) {
	withHeader := func(k, v string, a answer) answer {
		return func(n int, w http.ResponseWriter, r *http.Request) { w.Header().Set(k, v); a(n, w, r) }
	}
	for _, tc := range []struct {
		name   string
		answer answer
		waits  []time.Duration
		tokens int // left in the quota: 14 a retry, 5 after a throttling error, refunded on success
	}{
		{"a 500", s3Error(500, "InternalError"), []time.Duration{25 * time.Millisecond, 50 * time.Millisecond}, 500 - 14},
		{"a throttling error", s3Error(503, "SlowDown"), []time.Duration{500 * time.Millisecond, time.Second}, 500 - 5},
		{"x-amz-retry-after below the backoff", withHeader(awsretry.HeaderAmzRetryAfter, "0", s3Error(503, "SlowDown")),
			[]time.Duration{500 * time.Millisecond, time.Second}, 500 - 5},
		{"x-amz-retry-after within 5 s above it", withHeader(awsretry.HeaderAmzRetryAfter, "1500", s3Error(500, "InternalError")),
			[]time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond}, 500 - 14},
		{"x-amz-retry-after above", withHeader(awsretry.HeaderAmzRetryAfter, "60000", s3Error(500, "InternalError")),
			[]time.Duration{5025 * time.Millisecond, 5050 * time.Millisecond}, 500 - 14},
		{"x-amz-retry-after unreadable", withHeader(awsretry.HeaderAmzRetryAfter, "soon", s3Error(500, "InternalError")),
			[]time.Duration{25 * time.Millisecond, 50 * time.Millisecond}, 500 - 14},
		{"Retry-After is not read", withHeader("Retry-After", "10", s3Error(503, "SlowDown")),
			[]time.Duration{500 * time.Millisecond, time.Second}, 500 - 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, failThen(2, tc.answer, s3Object))
			clock := autoClock()
			r, quota := awsretry.NewStandardWith("s3", clock, policytest.NewRand(0.5))
			require.NoError(t, getObject(context.Background(), newS3(s, withAdapter(r, newTransport(t)))))
			require.Equal(t, 3, s.attempts())
			require.Equal(t, tc.waits, clock.Waits())
			q := r.Pipeline().Explain().Stack[0]
			require.Contains(t, q.Summary, "a retry takes 14 (5 after a throttling error)")
			// The first retry failed (not refunded), the second succeeded (refunded).
			require.Equal(t, tc.tokens, quota.Tokens())
		})
	}
}
