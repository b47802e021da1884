package policyotel_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/retry"
)

// An Observer on an OpenTelemetry MeterProvider observes a pipeline; one call that
// fails once and then succeeds shows in its instruments. In a service the provider
// is the one your OTel SDK set-up exports.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := policyotel.New(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{Base: time.Millisecond, Cap: time.Millisecond})),
		policy.Name("db"), policy.Observe(obs)))

	n := 0
	_ = p.Do(context.Background(), func(context.Context) error {
		if n++; n == 1 {
			return fault.Retryable(errors.New("db busy"))
		}
		return nil
	})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && (m.Name == "backstop.calls" || m.Name == "backstop.attempts" || m.Name == "backstop.retries") {
				for _, dp := range sum.DataPoints {
					outcome, _ := dp.Attributes.Value("outcome")
					reason, _ := dp.Attributes.Value("reason")
					fmt.Println(m.Name, outcome.String()+reason.String(), dp.Value)
				}
			}
		}
	}
	// Unordered output:
	// backstop.calls success 1
	// backstop.attempts failure 1
	// backstop.attempts success 1
	// backstop.retries retryable 1
}
