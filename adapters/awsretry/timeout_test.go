package awsretry_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/awsretry"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// TestRetryer_PerAttemptTimeout: the pipeline's per-attempt timeout ends each attempt
// the SDK sends to a service that never answers; the retry makes the next, and the
// quota prices each retry as a timeout's.
func TestRetryer_PerAttemptTimeout(t *testing.T) {
	s := newService(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{}))
	p := policy.Must(policy.Wrap(q, backstopRetry(autoClock()), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 50 * time.Millisecond}))))
	err := getObject(context.Background(), newS3(s, withAdapter(policy.Must(awsretry.New(p, awsretry.Options{})), newTransport(t))))
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 3, s.attempts())
	require.Equal(t, 472, q.Tokens(), "tokens 472 = 500 − 2 retries after a timeout × 14")
}

// FuzzAmzRetryAfter checks the hint Classify reads from X-Amz-Retry-After against
// strconv: a positive count of milliseconds up to callpath.MaxRetryAfter is the hint,
// at most AmzRetryAfterSpan. Anything else is none, and the error stays plainly
// retryable.
func FuzzAmzRetryAfter(f *testing.F) {
	for _, s := range []string{
		"700",                  // 0.7 s
		"0",                    // at once
		"-5",                   // negative: ignored
		"1.5",                  // not an integer: ignored
		"86400001",             // past callpath.MaxRetryAfter: ignored
		"99999999999999999999", // beyond int64
		"",                     // absent
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		if v != "" {
			h.Set(awsretry.HeaderAmzRetryAfter, v)
		}
		err := &smithyhttp.ResponseError{Err: errors.New("SlowDown"),
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h}}}
		m := fault.Of(awsretry.Classify(err))
		if !m.Retryable {
			t.Fatalf("503 with X-Amz-Retry-After %q: marks %+v, want retryable", v, m)
		}
		got, has := fault.Hint(awsretry.Classify(err))
		ms, perr := strconv.ParseInt(h.Get(awsretry.HeaderAmzRetryAfter), 10, 64)
		want := perr == nil && ms > 0 && ms <= int64(callpath.MaxRetryAfter/time.Millisecond) // 0: come back after the backoff
		if has != want || (want && got != min(time.Duration(ms)*time.Millisecond, awsretry.AmzRetryAfterSpan)) {
			t.Fatalf("X-Amz-Retry-After %q: hint %v, %v; want %v, %v", v, got, has, time.Duration(ms)*time.Millisecond, want)
		}
	})
}
