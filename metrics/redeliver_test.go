package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/redeliver"
)

// A redelivery Schedule is what AddRedeliver reads.
var _ metrics.RedeliverCounts = (*redeliver.Schedule)(nil)

func TestObserver_AddRedeliver(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	p := policy.Must(redeliver.New(redeliver.Options{Rand: policytest.NewRand(0.5), MaxDeliveries: 3}))
	require.NoError(t, obs.AddRedeliver("orders", p))
	require.Error(t, obs.AddRedeliver("orders", p), "a name exported twice")
	require.ErrorIs(t, obs.AddRedeliver("x", nil), metrics.ErrInvalidOptions)

	errJob := errors.New("job failed")
	p.Decide(1, nil)
	p.Decide(1, errJob)                              // 5 s
	p.Decide(2, errJob)                              // 10 s
	p.Decide(3, errJob)                              // exhausted
	p.Decide(1, fault.Permanent(errJob))             // permanent
	p.Decide(1, fault.After(errJob, 90*time.Minute)) // a hint of 1.5 h
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_redeliver_dead_lettered_total Messages a redelivery policy dead-lettered, by reason (permanent, exhausted).
# TYPE backstop_redeliver_dead_lettered_total counter
backstop_redeliver_dead_lettered_total{queue="orders",reason="exhausted"} 1
backstop_redeliver_dead_lettered_total{queue="orders",reason="permanent"} 1
# HELP backstop_redeliver_delay_seconds Delays of the redeliveries a redelivery policy decided.
# TYPE backstop_redeliver_delay_seconds histogram
backstop_redeliver_delay_seconds_bucket{queue="orders",le="1"} 0
backstop_redeliver_delay_seconds_bucket{queue="orders",le="10"} 2
backstop_redeliver_delay_seconds_bucket{queue="orders",le="60"} 2
backstop_redeliver_delay_seconds_bucket{queue="orders",le="300"} 2
backstop_redeliver_delay_seconds_bucket{queue="orders",le="900"} 2
backstop_redeliver_delay_seconds_bucket{queue="orders",le="3600"} 2
backstop_redeliver_delay_seconds_bucket{queue="orders",le="43200"} 3
backstop_redeliver_delay_seconds_bucket{queue="orders",le="+Inf"} 3
backstop_redeliver_delay_seconds_sum{queue="orders"} 5415
backstop_redeliver_delay_seconds_count{queue="orders"} 3
# HELP backstop_redeliver_deliveries_total Deliveries a redelivery policy decided: succeeded, redelivered or dead-lettered.
# TYPE backstop_redeliver_deliveries_total counter
backstop_redeliver_deliveries_total{queue="orders"} 6
`), "backstop_redeliver_deliveries_total", "backstop_redeliver_delay_seconds", "backstop_redeliver_dead_lettered_total")
	require.NoError(t, err)
}
