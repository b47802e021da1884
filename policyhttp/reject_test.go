package policyhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
)

func TestWriteRejection_AnswersAForcedBreakerWithItsRetryAfter(t *testing.T) {
	b := policy.Must(breaker.New(breaker.Options{Name: "inventory", MaxOpenTimeout: 2500 * time.Millisecond}))
	b.ForceOpen()
	err := policy.Must(policy.Wrap(b)).Do(context.Background(), func(context.Context) error { return nil })
	rec := httptest.NewRecorder()
	require.True(t, policyhttp.WriteRejection(rec, fmt.Errorf("inventory: %w", err)))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "3", rec.Header().Get("Retry-After"), "2.5 s rounded up to whole seconds")
	require.Equal(t, "2500", rec.Header().Get(callpath.HeaderRetryAfterMillis))
	require.Equal(t, "forced", rec.Header().Get(callpath.HeaderRefused))
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
}

func TestWriteRejection_ARefusalWithoutRetryAfterSaysComeBackInASecond(t *testing.T) {
	rec := httptest.NewRecorder()
	rej := &policy.RejectError{Policy: breaker.Kind, Name: "db", Reason: breaker.ReasonHalfOpen, Err: breaker.ErrOpen}
	require.True(t, policyhttp.WriteRejection(rec, rej))
	require.Equal(t, "1", rec.Header().Get("Retry-After"), "at least 1 s: delay-seconds has no smaller value")
	require.Equal(t, "0", rec.Header().Get(callpath.HeaderRetryAfterMillis))
	require.Equal(t, "half_open", rec.Header().Get(callpath.HeaderRefused))
}

// A half-open breaker's refusal asks callers back after the time its probes are given:
// coming back at once would spend a caller's attempts while the probes are still out.
func TestWriteRejection_AHalfOpenBreakerGivesItsProbesTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: 1500 * time.Millisecond, OpenJitter: -1}))
		p := policy.Must(policy.Wrap(b))
		_ = p.Do(context.Background(), func(context.Context) error { return errors.New("db down") })
		time.Sleep(1500 * time.Millisecond)
		release, probed := make(chan struct{}), make(chan error)
		go func() {
			probed <- p.Do(context.Background(), func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait() // the probe is out

		rec := httptest.NewRecorder()
		require.True(t, policyhttp.WriteRejection(rec, p.Do(context.Background(), func(context.Context) error { return nil })))
		require.Equal(t, "2", rec.Header().Get("Retry-After"), "1.5 s rounded up to whole seconds")
		require.Equal(t, "1500", rec.Header().Get(callpath.HeaderRetryAfterMillis))
		require.Equal(t, "half_open", rec.Header().Get(callpath.HeaderRefused))
		close(release)
		require.NoError(t, <-probed)
	})
}

func TestWriteRejection_WritesNothingForOtherErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	require.False(t, policyhttp.WriteRejection(rec, errors.New("boom")))
	require.False(t, policyhttp.WriteRejection(rec, nil))
	require.Empty(t, rec.Header())
	require.False(t, rec.Flushed)
	require.Equal(t, 0, rec.Body.Len())
}
