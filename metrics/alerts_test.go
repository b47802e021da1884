package metrics_test

import (
	"context"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/redeliver"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// TestDashboards_NameSeriesThatExist: every backstop_* series the alerting rules in
// dashboards/alerts.yaml and the Grafana dashboard dashboards/backstop.json query
// is one this package exports, after a scripted run.
func TestDashboards_NameSeriesThatExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	s := policy.Must(shed.New(shed.Options{Name: "api"}))
	obs := policy.Must(metrics.New(reg, metrics.Options{Breakers: []metrics.BreakerGauge{brk},
		Shedders: map[string]metrics.ShedGauges{"api": s},
		Budgets:  map[string]metrics.Leveler{"orders": policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))}}))
	require.NoError(t, obs.AddCache("users", fakeCache{}))
	require.NoError(t, obs.AddRedeliver("jobs", policy.Must(redeliver.New(redeliver.Options{}))))
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2})))).With(policy.Name("orders"), policy.Observe(obs))
	_ = p.Do(context.Background(), func(context.Context) error { return nil })
	s2 := policy.Must(shed.New(shed.Options{Name: "api2", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Observer: obs}))
	held, _ := s2.Admit(context.Background(), shed.PriorityDefault)
	_, _ = s2.Admit(context.Background(), shed.PriorityDefault)
	held.Release()
	// A fallback answering a bulkhead's refusal, a rate limiter's refusal, and a wait.
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices"}))
	bh := policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 1}))
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	rl := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 1, Burst: 1, MaxWait: time.Millisecond, Clock: clock}))
	fp := policy.Must(policy.Wrap(fb, bh, rl, policy.Name("prices"), policy.Observe(obs)))
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fp.Do(context.Background(), func(context.Context) error { close(in); <-release; return nil })
	}()
	<-in
	_, _ = fb.Get(context.Background(), fp, func(context.Context) (int, error) { return 1, nil }) // the bulkhead refuses
	close(release)
	<-done
	_, _ = fb.Get(context.Background(), fp, func(context.Context) (int, error) { return 1, nil }) // the token comes after MaxWait
	wp := policy.Must(policy.Wrap(policy.Must(ratelimit.New(ratelimit.Options{Name: "waits", Rate: 1, Burst: 1, Clock: clock})), policy.Observe(obs)))
	_ = wp.Do(context.Background(), func(context.Context) error { return nil })
	_ = wp.Do(context.Background(), func(context.Context) error { return nil }) // waits a second

	mfs, err := reg.Gather()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	// A histogram's family is named without the _bucket, _sum and _count its series add.
	// A name followed by .+ is a regular expression over names: some family has it
	// for a prefix.
	series := regexp.MustCompile(`backstop_[a-z_]+?(_bucket|_sum|_count)?\b(\.\+)?`)
	for _, file := range []string{"alerts.yaml", "backstop.json"} {
		text, err := os.ReadFile("../dashboards/" + file)
		require.NoError(t, err)
		found := series.FindAllStringSubmatch(string(text), -1)
		require.NotEmpty(t, found, file)
		for _, m := range found {
			if m[2] != "" {
				prefix := strings.TrimSuffix(m[0], m[2])
				require.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(exported)), func(f string) bool {
					return strings.HasPrefix(f, prefix)
				}), "%s queries %s, and metrics exports no family named so", file, m[0])
				continue
			}
			family := m[0][:len(m[0])-len(m[1])]
			require.True(t, exported[family], "%s queries %s, which metrics does not export", file, m[0])
		}
	}
}
