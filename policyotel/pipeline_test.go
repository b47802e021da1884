package policyotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/retry"
)

// TestForPipeline_RecordsAsObserveDoes checks that the Observer prepared for a
// pipeline records calls, attempts and durations under the same attributes as the
// Observer handed the events directly.
func TestForPipeline_RecordsAsObserveDoes(t *testing.T) {
	record := func(o event.Observer) map[string]metricdata.Metrics {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		obs, err := policyotel.New(mp)
		require.NoError(t, err)
		target := event.Observer(obs)
		if o != nil {
			target = obs.ForPipeline("db")
		}
		for _, e := range []event.Event{
			{Kind: event.AttemptEnd, Pipeline: "db", Err: errDown},
			{Kind: event.AttemptEnd, Pipeline: "db"},
			{Kind: event.CallEnd, Pipeline: "db", Elapsed: 3e6},
			{Kind: event.CallEnd, Pipeline: "db", Err: errDown, Elapsed: 5e6},
		} {
			target.Observe(e)
		}
		return collect(t, reader)
	}
	direct, prepared := record(nil), record(&struct{ event.Observer }{})
	for _, name := range []string{"backstop.calls", "backstop.attempts"} {
		sums := func(m metricdata.Metrics) map[attribute.Distinct]int64 {
			out := map[attribute.Distinct]int64{}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				out[dp.Attributes.Equivalent()] = dp.Value
			}
			return out
		}
		require.Len(t, sums(prepared[name]), 2, "%s: a success and a failure", name)
		require.Equal(t, sums(direct[name]), sums(prepared[name]), "%s by attributes", name)
	}
	d, p := direct["backstop.call.duration"].Data.(metricdata.Histogram[float64]).DataPoints,
		prepared["backstop.call.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, p, 1)
	require.Equal(t, d[0].Attributes, p[0].Attributes)
	require.Equal(t, uint64(2), p[0].Count)
	require.InDelta(t, 0.008, p[0].Sum, 1e-12, "3 ms + 5 ms")
}

func benchObserved(b *testing.B, observe bool) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			p := policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "db"})), policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
				policy.Must(retry.New(retry.Options{MaxAttempts: 3})), policy.Name("db")))
			if observe {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				obs, err := policyotel.New(mp)
				require.NoError(b, err)
				p = p.With(policy.Observe(obs))
			}
			ctx := context.Background()
			fn := func(context.Context) error { return nil }
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					_ = p.Do(ctx, fn)
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = p.Do(ctx, fn)
				}
			})
		})
	}
}

// BenchmarkObservedBreakerBudgetRetry is bench/'s observed stack with this Observer;
// _Unobserved is the same stack without it.
func BenchmarkObservedBreakerBudgetRetry(b *testing.B)            { benchObserved(b, true) }
func BenchmarkObservedBreakerBudgetRetry_Unobserved(b *testing.B) { benchObserved(b, false) }
