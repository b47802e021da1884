package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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

// TestObserver_RejectionsAndPublishedGauges: a bulkhead and a rate limiter inside an
// observed pipeline have their refusals counted in backstop_rejections_total and
// their published gauges exported as backstop_stage_*, with no Add call.
func TestObserver_RejectionsAndPublishedGauges(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	var logs bytes.Buffer
	log := metrics.Slog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})), slog.LevelInfo)

	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	bh := policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 1, Clock: clock}))
	rl := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 10, Burst: 1, Mode: ratelimit.Refuse, Clock: clock}))
	p := policy.Must(policy.Wrap(fb, bh, rl, policy.Name("shop"), policy.Observe(event.Observers(obs, log))))
	require.NoError(t, obs.AddStage(rl), "the limiter its pipeline exported, again")
	require.ErrorIs(t, obs.AddStage(policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 1, Burst: 1}))), metrics.ErrInvalidOptions,
		"another limiter under its name")
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
	require.Equal(t, 1.0, sample(t, reg, "backstop_stage_inflight", map[string]string{"policy": bulkhead.Kind, "name": "prices"}),
		"the slot held now")
	v, err = fb.Get(context.Background(), p, ok)
	require.NoError(t, err)
	require.Equal(t, -1, v)
	close(release)
	wg.Wait()

	for _, c := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"backstop_rejections_total", map[string]string{"pipeline": "shop", "policy": ratelimit.Kind, "name": "prices", "reason": "no_token"}, 2},
		{"backstop_rejections_total", map[string]string{"pipeline": "shop", "policy": bulkhead.Kind, "name": "prices", "reason": "limit"}, 1},
		{"backstop_fallbacks_total", map[string]string{"pipeline": "shop", "fallback": "prices", "reason": "rejected", "from": "value"}, 3},
		{"backstop_stage_inflight", map[string]string{"policy": bulkhead.Kind, "name": "prices"}, 0},
		{"backstop_stage_waiting", map[string]string{"policy": bulkhead.Kind, "name": "prices"}, 0},
		{"backstop_stage_limit", map[string]string{"policy": bulkhead.Kind, "name": "prices"}, 1},
		{"backstop_stage_tokens", map[string]string{"policy": ratelimit.Kind, "name": "prices"}, 0}, // the token the last call took
	} {
		require.Equal(t, c.want, sample(t, reg, c.family, c.labels), "%s%v", c.family, c.labels)
	}
	n, err := testutil.GatherAndCount(reg, "backstop_rejections_total")
	require.NoError(t, err)
	require.Equal(t, 2, n, "one series per stage and reason")

	require.Contains(t, logs.String(), `level=INFO msg="stage rejected" pipeline=shop policy=rate_limit name=prices reason=no_token retry_after=100ms waited=0s`)
	require.Contains(t, logs.String(), `level=INFO msg="stage rejected" pipeline=shop policy=bulkhead name=prices reason=limit `)
	require.Contains(t, logs.String(), `level=INFO msg="fallback answered" pipeline=shop fallback=prices reason=rejected from=value error="rate_limit prices: rejected (no_token); retry after 100ms"`)
}

// TestObserver_Waits: calls a rate limiter held, then let through, are timed in
// backstop_wait_seconds{policy, name}, and none is counted as a rejection.
func TestObserver_Waits(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	var logs bytes.Buffer
	log := metrics.Slog(slog.New(slog.NewTextHandler(&logs, nil)), slog.LevelInfo)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	rl := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 10, Burst: 1, Clock: clock}))
	p := policy.Must(policy.Wrap(rl, policy.Name("shop"), policy.Observe(event.Observers(obs, log))))
	for range 3 {
		require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
	}
	n, err := testutil.GatherAndCount(reg, "backstop_rejections_total")
	require.NoError(t, err)
	require.Zero(t, n, "nothing refused")
	count, sum := histogramAt(t, reg, "backstop_wait_seconds", map[string]string{"policy": ratelimit.Kind, "name": "prices"})
	require.Equal(t, uint64(2), count, "two calls waited")
	require.InDelta(t, 0.2, sum, 1e-9, "100ms each")
	require.Contains(t, logs.String(), `msg="stage waited" pipeline=shop policy=rate_limit name=prices waited=100ms`)
}

// sample returns the value of the one counter or gauge of family with labels,
// failing if there is none.
func sample(t *testing.T, g prometheus.Gatherer, family string, labels map[string]string) float64 {
	t.Helper()
	v, _, _ := lookup(t, g, family, labels)
	return v
}

// histogramAt returns the sample count and sum of the one histogram of family with
// labels, failing if there is none.
func histogramAt(t *testing.T, g prometheus.Gatherer, family string, labels map[string]string) (count uint64, sum float64) {
	t.Helper()
	_, count, sum = lookup(t, g, family, labels)
	return count, sum
}

// lookup finds the one series of family whose labels are labels, exactly.
func lookup(t *testing.T, g prometheus.Gatherer, family string, labels map[string]string) (value float64, count uint64, sum float64) {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return 0, h.GetSampleCount(), h.GetSampleSum()
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue(), 0, 0 // one of them is nil, and reads 0
		}
	}
	t.Fatalf("no series %s%v", family, labels)
	return 0, 0, 0
}
