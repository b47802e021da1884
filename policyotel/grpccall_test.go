package policyotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/retry"
)

var grpcAttrs = attribute.NewSet(attribute.String("grpc.method", "pkg.Service/Method"), attribute.String("grpc.target", "dns:///svc:443"))

// histogram returns the data point of the histogram name with grpcAttrs, and false if
// there is none.
func histogram[N int64 | float64](t *testing.T, r *sdkmetric.ManualReader, name string) (metricdata.HistogramDataPoint[N], bool) {
	t.Helper()
	m, ok := collect(t, r)[name]
	if !ok {
		return metricdata.HistogramDataPoint[N]{}, false
	}
	for _, dp := range m.Data.(metricdata.Histogram[N]).DataPoints {
		if dp.Attributes.Equals(&grpcAttrs) {
			return dp, true
		}
	}
	return metricdata.HistogramDataPoint[N]{}, false
}

// TestGRPCCall_RetriesAndDelay: a call whose context carries a GRPCCall records its
// retries (none for a call that needed none) and the time between its attempts.
func TestGRPCCall_RetriesAndDelay(t *testing.T) {
	for _, tt := range []struct {
		failures  int
		wantDelay time.Duration
	}{
		{0, 0},
		{1, 50 * time.Millisecond}, // Full jitter at 0.5 of Base: 0.5 × 100ms
		{2, 50*time.Millisecond + 100*time.Millisecond}, // then 0.5 × 200ms
	} {
		obs, reader, _, _ := setup(t)
		clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)})))).
			With(policy.Observe(obs))
		ctx, call := obs.StartGRPCCall(context.Background(), "pkg.Service/Method", "dns:///svc:443", clock)
		n := 0
		require.NoError(t, p.Do(ctx, func(context.Context) error {
			if n++; n <= tt.failures {
				return fault.Retryable(errDown)
			}
			return nil
		}))
		call.End(ctx)
		call.End(ctx) // recorded once

		retries, ok := histogram[int64](t, reader, policyotel.MetricGRPCRetries)
		if tt.failures == 0 {
			require.False(t, ok, "a call with no retries recorded %v retries; A96 reports no 0", retries)
		} else {
			require.True(t, ok, "%d failures: no %s point", tt.failures, policyotel.MetricGRPCRetries)
			require.Equal(t, uint64(1), retries.Count, "%d failures: calls recorded", tt.failures)
			require.Equal(t, int64(tt.failures), retries.Sum, "%d failures: retries", tt.failures)
		}
		_, hedged := histogram[int64](t, reader, policyotel.MetricGRPCHedges)
		require.False(t, hedged, "%d failures: a retried call recorded hedges", tt.failures)
		delay, ok := histogram[float64](t, reader, policyotel.MetricGRPCRetryDelay)
		require.True(t, ok, "%d failures: no %s point", tt.failures, policyotel.MetricGRPCRetryDelay)
		require.Equal(t, uint64(1), delay.Count, "%d failures: calls recorded", tt.failures)
		require.InDelta(t, tt.wantDelay.Seconds(), delay.Sum, 1e-9, "%d failures: retry delay", tt.failures)
		var slept time.Duration
		for _, d := range clock.Waits() {
			slept += d
		}
		require.Equal(t, tt.wantDelay, slept, "%d failures: the retry's sleeps", tt.failures)
	}
}

// TestGRPCCall_EventsWithoutCallAreIgnored: a pipeline's events outside any GRPCCall
// record none of the gRPC instruments.
func TestGRPCCall_EventsWithoutCallAreIgnored(t *testing.T) {
	obs, reader, _, _ := setup(t)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)})))).
		With(policy.Observe(obs))
	n := 0
	require.NoError(t, p.Do(context.Background(), func(context.Context) error {
		if n++; n == 1 {
			return fault.Retryable(errDown)
		}
		return nil
	}))
	got := collect(t, reader)
	for _, name := range []string{policyotel.MetricGRPCRetries, policyotel.MetricGRPCHedges, policyotel.MetricGRPCRetryDelay} {
		_, ok := got[name]
		require.False(t, ok, "a call with no GRPCCall recorded %s", name)
	}
	require.Equal(t, int64(2), sum(t, got["backstop.attempts"], attribute.String("pipeline", ""), attribute.String("outcome", "failure"))+
		sum(t, got["backstop.attempts"], attribute.String("pipeline", ""), attribute.String("outcome", "success")), "attempts")
}

// TestGRPCCall_TwoObservers: a pipeline observed by two policyotel Observers feeds a
// GRPCCall from the one that started it only, so that its attempts count once.
func TestGRPCCall_TwoObservers(t *testing.T) {
	obs, reader, _, _ := setup(t)
	other, _, _, _ := setup(t)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)})))).
		With(policy.Observe(event.Observers(other, obs)))
	ctx, call := obs.StartGRPCCall(context.Background(), "pkg.Service/Method", "dns:///svc:443", clock)
	n := 0
	require.NoError(t, p.Do(ctx, func(context.Context) error {
		if n++; n == 1 {
			return fault.Retryable(errDown)
		}
		return nil
	}))
	call.End(ctx)
	retries, ok := histogram[int64](t, reader, policyotel.MetricGRPCRetries)
	require.True(t, ok, "no %s point", policyotel.MetricGRPCRetries)
	require.Equal(t, int64(1), retries.Sum, "retries")
	_, hedged := histogram[int64](t, reader, policyotel.MetricGRPCHedges)
	require.False(t, hedged, "a retried call observed twice recorded hedges")
	delay, _ := histogram[float64](t, reader, policyotel.MetricGRPCRetryDelay)
	require.InDelta(t, 0.05, delay.Sum, 1e-9, "retry delay: 0.5 × 100ms")
}
