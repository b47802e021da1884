package policyhttp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// TestTransport_DoesNotForwardAnUpstreamAttemptNumber: a handler owned upstream at
// attempt 3 calls on through a pipeline with no retry of its own. The request it makes
// is its first and only one: it carries the ownership on as attempt 1, so the next
// server does not shed it as a retry, and its handler still fails fast.
func TestTransport_DoesNotForwardAnUpstreamAttemptNumber(t *testing.T) {
	srv := newServer(t, status(200))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	for _, p := range []*policy.Pipeline{
		policy.MustWrap(),
		policy.MustWrap(retry.MustNew(retry.Options{MaxAttempts: 3})), // suppressed by the owner rule
	} {
		c := &http.Client{Transport: policyhttp.NewTransport(base, p)}
		ctx := policy.WithUpstreamAttempt(context.Background(), 3)
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		require.NoError(t, err)
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
	}
	require.Equal(t, []string{"1", "1"}, srv.header(policy.HeaderAttempt))
}

func TestTransport_DropsAnAttemptHeaderItDidNotMake(t *testing.T) {
	srv := newServer(t, status(200))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(base, policy.MustWrap())}
	req := get(t, srv.URL)
	req.Header.Set(policy.HeaderAttempt, "5") // copied from an incoming request, say
	res, err := c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, []string{""}, srv.header(policy.HeaderAttempt), "no owner here, no attempt header")
	require.Equal(t, "5", req.Header.Get(policy.HeaderAttempt), "the caller's request is not modified")
}

// TestTransport_CancelDuringBackoffIsContextCanceled: through an http.Client, a
// caller who cancels while the retry sleeps sees context.Canceled, as with the
// standard transport.
func TestTransport_CancelDuringBackoffIsContextCanceled(t *testing.T) {
	srv := newServer(t, status(503))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	clock := policytest.NewClock(t0)
	p := policy.MustWrap(retry.MustNew(retry.Options{MaxAttempts: 3, Clock: clock, Strategy: retry.None{}}))
	c := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.WithClock(clock))}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	require.NoError(t, err)
	done := make(chan error)
	go func() {
		res, err := c.Do(req)
		if res != nil {
			res.Body.Close()
		}
		done <- err
	}()
	clock.BlockUntil(1) // the retry sleeps after the first 503
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, policy.OutcomeCanceled, policy.Outcome(err))
	require.Equal(t, 1, srv.count())
}
