package metrics_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// TestDashboards_NameSeriesThatExist: every backstop_* series the alerting rules in
// dashboards/alerts.yaml and the Grafana dashboard dashboards/backstop.json query
// is one this package exports, after a scripted run.
func TestDashboards_NameSeriesThatExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	brk := breaker.MustNew("db", breaker.Options{})
	s := shed.MustNew(shed.Options{Name: "api"})
	obs := metrics.MustNew(reg, metrics.Options{Breakers: []metrics.BreakerGauge{brk},
		Shedders: map[string]metrics.ShedGauges{"api": s},
		Budgets:  map[string]metrics.Leveler{"orders": budget.MustNewTokenBucket(10, 0.1)}})
	require.NoError(t, obs.AddCache("users", fakeCache{}))
	require.NoError(t, obs.AddRedeliver("jobs", redeliver.MustNew(redeliver.Options{})))
	p := policy.MustWrap(retry.MustNew(retry.Options{MaxAttempts: 2})).With(policy.Name("orders"), policy.Observe(obs))
	_ = p.Do(context.Background(), func(context.Context) error { return nil })
	s2 := shed.MustNew(shed.Options{Name: "api2", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Observer: obs})
	held, _ := s2.Admit(context.Background(), shed.PriorityDefault)
	_, _ = s2.Admit(context.Background(), shed.PriorityDefault)
	held.Release()

	mfs, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	// A histogram's family is named without the _bucket, _sum and _count its series add.
	series := regexp.MustCompile(`backstop_[a-z_]+?(_bucket|_sum|_count)?\b`)
	for _, file := range []string{"alerts.yaml", "backstop.json"} {
		text, err := os.ReadFile("../dashboards/" + file)
		require.NoError(t, err)
		found := series.FindAllStringSubmatch(string(text), -1)
		require.NotEmpty(t, found, file)
		for _, m := range found {
			family := m[0][:len(m[0])-len(m[1])]
			require.True(t, exported[family], "%s queries %s, which metrics does not export", file, m[0])
		}
	}
}
