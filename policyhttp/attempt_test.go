package policyhttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/callpath"

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
		policy.Must(policy.Wrap()),
		policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3})))), // suppressed by the owner rule
	} {
		c := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{})}
		ctx := callpath.WithUpstreamAttempt(context.Background(), 3)
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		require.NoError(t, err)
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
	}
	require.Equal(t, []string{"1", "1"}, srv.header(callpath.HeaderAttempt))
}

func TestTransport_DropsAnAttemptHeaderItDidNotMake(t *testing.T) {
	srv := newServer(t, status(200))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: policyhttp.NewTransport(base, policy.Must(policy.Wrap()), policyhttp.Options{})}
	req := get(t, srv.URL)
	req.Header.Set(callpath.HeaderAttempt, "5") // copied from an incoming request, say
	res, err := c.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, []string{""}, srv.header(callpath.HeaderAttempt), "no owner here, no attempt header")
	require.Equal(t, "5", req.Header.Get(callpath.HeaderAttempt), "the caller's request is not modified")
}

// TestTransport_CancelDuringBackoffIsContextCanceled: through an http.Client, a
// caller who cancels while the retry sleeps sees context.Canceled, as with the
// standard transport.
func TestTransport_CancelDuringBackoffIsContextCanceled(t *testing.T) {
	srv := newServer(t, status(503))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	clock := policytest.NewClock(t0)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Strategy: retry.None{}}))))
	c := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{Clock: clock})}
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

// TestTransport_HostileRetryAfterFromUpstream: negative, huge or garbage Retry-After
// values from an upstream never make the client wait longer than MaxHintDelay: garbage
// is ignored (the backoff applies), a huge value saturates and ends the call at once.
func TestTransport_HostileRetryAfterFromUpstream(t *testing.T) {
	for _, tt := range []struct {
		value string
		calls int
		waits []time.Duration
	}{
		{"-5", 2, []time.Duration{0}},             // ignored: Full jitter at rand 0
		{"garbage", 2, []time.Duration{0}},        // ignored
		{"99999999999999999999", 1, nil},          // saturates at 24 h > MaxHintDelay: no retry
		{"Fri, 01 Jan 9999 00:00:00 GMT", 1, nil}, // the same as a date
		{strings.Repeat("9", 1<<16), 1, nil},      // 64 KiB of digits: still one bounded parse
	} {
		srv := newServer(t, status(503, "Retry-After", tt.value))
		clock := policytest.NewClock(t0).AutoAdvance(true)
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Clock: clock, Rand: zeroRand{}}))))
		base := &http.Transport{}
		c := &http.Client{Transport: policyhttp.NewTransport(base, p, policyhttp.Options{Clock: clock})}
		res, err := c.Get(srv.URL)
		require.NoError(t, err)
		res.Body.Close()
		base.CloseIdleConnections()
		require.Equal(t, 503, res.StatusCode)
		require.Equal(t, tt.calls, srv.count(), "Retry-After %.40q", tt.value)
		for _, w := range clock.Waits() {
			require.LessOrEqual(t, w, time.Second, "Retry-After %.40q: waited %v", tt.value, w)
		}
	}
}
