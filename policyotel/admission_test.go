package policyotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
)

func TestObserver_FallbackBulkheadAndRateLimit(t *testing.T) {
	obs, reader, rec, tp := setup(t)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	fb := fallback.MustNew("prices", fallback.Options[int]{Value: -1})
	rl := ratelimit.MustNew("prices", ratelimit.Options{Rate: 10, Burst: 1, MaxWait: 150 * time.Millisecond, Clock: clock})
	p := policy.MustWrap(fb, rl, policy.Name("shop"), policy.Observe(obs))

	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /prices")
	ok := func(context.Context) (int, error) { return 1, nil }
	_, err := fb.Get(ctx, p, ok) // the one token
	require.NoError(t, err)
	_, err = fb.Get(ctx, p, ok) // waits 100ms for the next
	require.NoError(t, err)
	// A call holds the bulkhead's one slot; the next is refused, and answered.
	bh := bulkhead.MustNew("prices", bulkhead.Options{MaxConcurrent: 1})
	bp := policy.MustWrap(fb, bh, policy.Name("shop-bh"), policy.Observe(obs))
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = fb.Get(context.Background(), bp, func(context.Context) (int, error) { close(in); <-release; return 1, nil })
	}()
	<-in
	v, err := fb.Get(ctx, bp, ok)
	require.NoError(t, err)
	require.Equal(t, -1, v)
	close(release)
	<-done
	refuse := ratelimit.MustNew("geo", ratelimit.Options{Rate: 1, Burst: 1, Mode: ratelimit.Refuse, Clock: policytest.NewClock(time.Time{})})
	rp := policy.MustWrap(refuse, policy.Name("geo"), policy.Observe(obs))
	require.NoError(t, rp.Do(ctx, func(context.Context) error { return nil }))
	require.ErrorIs(t, rp.Do(ctx, func(context.Context) error { return nil }), ratelimit.ErrLimited)
	span.End()

	ms := collect(t, reader)
	require.Equal(t, int64(1), sum(t, ms["backstop.bulkhead.rejections"], attribute.String("pipeline", "shop-bh"),
		attribute.String("bulkhead", "prices"), attribute.String("reason", "limit")))
	require.Equal(t, int64(1), sum(t, ms["backstop.fallbacks"], attribute.String("pipeline", "shop-bh"),
		attribute.String("fallback", "prices"), attribute.String("reason", "rejected"), attribute.String("from", "value")))
	require.Equal(t, int64(1), sum(t, ms["backstop.ratelimit.rejections"], attribute.String("pipeline", "geo"),
		attribute.String("limiter", "geo"), attribute.String("reason", "no_token")))
	h := ms["backstop.ratelimit.wait"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, h, 1)
	require.Equal(t, uint64(1), h[0].Count)
	require.InDelta(t, 0.1, h[0].Sum, 1e-9)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	var names []string
	for _, ev := range spans[0].Events() {
		names = append(names, ev.Name)
	}
	require.Equal(t, []string{"backstop.ratelimit.wait", "backstop.bulkhead.rejected", "backstop.fallback",
		"backstop.ratelimit.rejected", "backstop.call.rejected"}, names)
}
