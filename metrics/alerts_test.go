package metrics_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// TestAlerts_NameSeriesThatExist: every backstop_* series the alerting rules in
// dashboards/alerts.yaml query is one this package exports, after a scripted run.
func TestAlerts_NameSeriesThatExist(t *testing.T) {
	rules, err := os.ReadFile("../dashboards/alerts.yaml")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	brk := breaker.MustNew("db", breaker.Options{})
	s := shed.MustNew(shed.Options{Name: "api"})
	obs := metrics.MustNew(reg, metrics.Options{Breakers: []metrics.BreakerGauge{brk}, Shedders: map[string]metrics.ShedGauges{"api": s}})
	p := policy.MustWrap(retry.MustNew(retry.Options{MaxAttempts: 2})).With(policy.Name("orders"), policy.Observe(obs))
	_ = p.Do(context.Background(), func(context.Context) error { return nil })
	s2 := shed.MustNew(shed.Options{Name: "api2", Limit: 1, MaxQueue: -1, Observer: obs})
	held, _ := s2.Admit(context.Background(), shed.PriorityDefault)
	_, _ = s2.Admit(context.Background(), shed.PriorityDefault)
	held.Release()

	mfs, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	names := regexp.MustCompile(`backstop_[a-z_]+`).FindAllString(string(rules), -1)
	require.NotEmpty(t, names)
	for _, n := range names {
		require.True(t, exported[n], "alerts.yaml queries %s, which metrics does not export", n)
	}
}
