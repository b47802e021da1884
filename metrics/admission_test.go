package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
)

func TestObserver_FallbackBulkheadAndRateLimitSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := metrics.MustNew(reg, metrics.Options{})
	var logs bytes.Buffer
	log := metrics.Slog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})), slog.LevelInfo)

	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fb := fallback.MustNew("prices", fallback.Options[int]{Value: -1})
	bh := bulkhead.MustNew("prices", bulkhead.Options{MaxConcurrent: 1, Clock: clock})
	rl := ratelimit.MustNew("prices", ratelimit.Options{Rate: 10, Burst: 1, Mode: ratelimit.Refuse, Clock: clock})
	require.NoError(t, obs.AddBulkhead("prices", bh))
	require.NoError(t, obs.AddLimiter("prices", rl))
	require.NoError(t, obs.AddLimiter("prices", rl), "the same limiter again")
	require.ErrorIs(t, obs.AddLimiter("prices", ratelimit.MustNew("prices", ratelimit.Options{Rate: 1, Burst: 1})), metrics.ErrInvalidOptions, "another under its name")
	require.ErrorIs(t, obs.AddBulkhead("x", nil), metrics.ErrInvalidOptions)
	require.ErrorIs(t, obs.AddLimiter("x", nil), metrics.ErrInvalidOptions)

	p := policy.MustWrap(fb, bh, rl, policy.Name("shop"), policy.Observe(event.Observers(obs, log)))
	ok := func(context.Context) (int, error) { return 1, nil }

	_, err := fb.Get(context.Background(), p, ok) // takes the one token
	require.NoError(t, err)
	v, err := fb.Get(context.Background(), p, ok) // refused by the limiter, answered
	require.NoError(t, err)
	require.Equal(t, -1, v)
	_, err = fb.Get(context.Background(), p, func(context.Context) (int, error) { return 0, errors.New("500") }) // refused again
	require.NoError(t, err)

	// A call holds the bulkhead's one slot; the next is refused by it.
	clock.Advance(time.Second)
	release, in := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = fb.Get(context.Background(), p, func(context.Context) (int, error) { close(in); <-release; return 1, nil })
	})
	<-in
	v, err = fb.Get(context.Background(), p, ok)
	require.NoError(t, err)
	require.Equal(t, -1, v)
	close(release)
	wg.Wait()

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_bulkhead_inflight Slots of a bulkhead taken now.
# TYPE backstop_bulkhead_inflight gauge
backstop_bulkhead_inflight{bulkhead="prices"} 0
# HELP backstop_bulkhead_limit A bulkhead's slots (MaxConcurrent).
# TYPE backstop_bulkhead_limit gauge
backstop_bulkhead_limit{bulkhead="prices"} 1
# HELP backstop_bulkhead_rejections_total Calls or attempts a bulkhead refused, by why (limit, queue, wait, deadline).
# TYPE backstop_bulkhead_rejections_total counter
backstop_bulkhead_rejections_total{bulkhead="prices",pipeline="shop",reason="limit"} 1
# HELP backstop_fallbacks_total Failed calls a fallback answered, by the failure's outcome (failure, rejected, deadline) and what answered (value, func, last-good).
# TYPE backstop_fallbacks_total counter
backstop_fallbacks_total{fallback="prices",from="value",pipeline="shop",reason="rejected"} 3
# HELP backstop_ratelimit_rejections_total Calls or attempts a rate limiter refused, by why (no_token, deadline, wait_limit).
# TYPE backstop_ratelimit_rejections_total counter
backstop_ratelimit_rejections_total{limiter="prices",pipeline="shop",reason="no_token"} 2
# HELP backstop_ratelimit_tokens Tokens in a rate limiter's bucket now; below 0 while calls wait for theirs.
# TYPE backstop_ratelimit_tokens gauge
backstop_ratelimit_tokens{limiter="prices"} 0
`), "backstop_bulkhead_inflight", "backstop_bulkhead_limit", "backstop_bulkhead_rejections_total", "backstop_fallbacks_total",
		"backstop_ratelimit_rejections_total", "backstop_ratelimit_tokens")
	require.NoError(t, err)

	require.Contains(t, logs.String(), `level=INFO msg="rate limiter refused" pipeline=shop limiter=prices reason=no_token retry_after=100ms`)
	require.Contains(t, logs.String(), `level=INFO msg="bulkhead refused" pipeline=shop bulkhead=prices reason=limit retry_after=0s waited=0s`)
	require.Contains(t, logs.String(), `level=INFO msg="fallback answered" pipeline=shop fallback=prices reason=rejected from=value error="ratelimit: prices: no token; the next comes in 100ms"`)
}

func TestObserver_RateLimitWaits(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := metrics.MustNew(reg, metrics.Options{})
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	rl := ratelimit.MustNew("prices", ratelimit.Options{Rate: 10, Burst: 1, Clock: clock})
	p := policy.MustWrap(rl, policy.Observe(obs))
	for range 3 {
		require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
	}
	n, err := testutil.GatherAndCount(reg, "backstop_ratelimit_rejections_total")
	require.NoError(t, err)
	require.Zero(t, n, "nothing refused")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "backstop_ratelimit_wait_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			require.Equal(t, uint64(2), h.GetSampleCount(), "two calls waited")
			require.InDelta(t, 0.2, h.GetSampleSum(), 1e-9, "100ms each")
		}
	}
}
