package thirdparty_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/examples/thirdparty"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

func TestQuota_Conformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return thirdparty.NewQuota("q", 1000) })
}

// TestQuota_OrderingRules: the stage's placement alone gets it the checks a
// built-in budget or shedder gets.
func TestQuota_OrderingRules(t *testing.T) {
	q := func() *thirdparty.Quota { return thirdparty.NewQuota("q", 1) }
	r := policy.Must(retry.New(retry.Options{}))
	s, err := shed.New(shed.Options{})
	require.NoError(t, err)
	tests := []struct {
		name  string
		stack []policy.Policy
		want  string
	}{
		{"inside the retry", []policy.Policy{r, q()}, "policy: O4: call_quota at position 2 is inside retry at position 1"},
		{"twice", []policy.Policy{q(), q()}, "policy: O6: two call_quota stages at positions 1 and 2"},
		{"outside a shedder", []policy.Policy{q(), s}, "policy: O5: shed at position 2 is not outermost (position 1 holds call_quota)"},
	}
	for _, tt := range tests {
		_, err := policy.Wrap(tt.stack...)
		require.ErrorIs(t, err, policy.ErrOrder, tt.name)
		require.True(t, strings.HasPrefix(err.Error(), tt.want), "%s: %v", tt.name, err)
	}
	_, err = policy.Wrap(q(), policy.Must(breaker.New(breaker.Options{Name: "db"})), r)
	require.NoError(t, err, "outside the retry, among built-ins")
}

// TestQuota_EventsAndMetrics: its refusals reach the pipeline's observer with its
// own Stage, and metrics exports its gauge and counts its refusals, naming neither.
func TestQuota_EventsAndMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	require.NoError(t, err)
	var seen []event.Event
	rec := event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.Rejected {
			seen = append(seen, e)
		}
	})
	p := policy.Must(policy.Wrap(thirdparty.NewQuota("q", 1), policy.Name("orders"), policy.Observe(event.Observers(m, rec))))
	ok := func(context.Context) error { return nil }
	require.NoError(t, p.Do(context.Background(), ok))
	err = p.Do(context.Background(), ok)
	var rej *policy.RejectError
	require.True(t, errors.As(err, &rej), "%v", err)
	require.Equal(t, thirdparty.Kind, rej.Policy)
	require.ErrorIs(t, err, policy.ErrRejected)

	require.Len(t, seen, 1)
	require.Equal(t, thirdparty.Kind, seen[0].Stage)
	require.Equal(t, "q", seen[0].Source)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_stage_quota_left Calls a quota still lets through.
# TYPE backstop_stage_quota_left gauge
backstop_stage_quota_left{name="q",policy="call_quota"} 0
`), "backstop_stage_quota_left"))
	require.Equal(t, 1.0, testutil.ToFloat64(counter(t, reg, "backstop_rejections_total")))
}

// counter returns the one series of the named family, as a collector testutil reads.
func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			labels := map[string]string{}
			for _, l := range mf.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.Equal(t, map[string]string{"pipeline": "orders", "policy": "call_quota", "name": "q", "reason": "spent"}, labels)
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(mf.GetMetric()[0].GetCounter().GetValue())
			return g
		}
	}
	t.Fatalf("no %s", name)
	return nil
}
