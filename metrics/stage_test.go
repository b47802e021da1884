package metrics_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
)

// myCache is a stage written outside Backstop, as a user would write one. It
// publishes two gauges. It rejects calls while full, and reports each call it held
// before letting it through.
type myCache struct {
	name    string
	entries atomic.Int64
	full    atomic.Bool
	hold    time.Duration // reported as the wait of each call let through
}

const myCacheKind = "my_cache"

func (c *myCache) Placement() policy.Placement { return policy.Placement{Kind: myCacheKind} }
func (c *myCache) Name() string                { return c.name }

func (c *myCache) Gauges() []policy.Gauge {
	return []policy.Gauge{
		{Name: "entries", Help: "Entries in a cache.", Value: func() float64 { return float64(c.entries.Load()) }},
		{Name: "capacity", Help: "Entries a cache may hold.", Value: func() float64 { return 8 }},
	}
}

func (c *myCache) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error {
		if c.full.Load() {
			err := &policy.RejectError{Policy: myCacheKind, Name: c.name, Reason: "full", RetryAfter: time.Second}
			if env.Observer != nil {
				env.Observer.Observe(event.Event{Kind: event.Rejected, Pipeline: env.Pipeline, Stage: myCacheKind, Source: c.name,
					Reason: "full", Delay: err.RetryAfter, Err: err, Context: ctx})
			}
			return err
		}
		if c.hold > 0 && env.Observer != nil {
			env.Observer.Observe(event.Event{Kind: event.Waited, Pipeline: env.Pipeline, Stage: myCacheKind, Source: c.name,
				Delay: c.hold, Context: ctx})
		}
		c.entries.Add(1)
		return next.Run(ctx, fn)
	})
}

// TestObserver_AThirdPartyStageGetsTheSeriesABuiltInOneGets: a stage the metrics
// package has never heard of, inside an observed pipeline, has its published gauges
// exported as backstop_stage_<gauge>{policy="my_cache"}, its rejections counted in
// backstop_rejections_total and its waits timed in backstop_wait_seconds.
func TestObserver_AThirdPartyStageGetsTheSeriesABuiltInOneGets(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	c := &myCache{name: "users", hold: 250 * time.Millisecond}
	p := policy.Must(policy.Wrap(c, policy.Name("profile"), policy.Observe(obs)))
	ok := func(context.Context) error { return nil }

	require.NoError(t, p.Do(context.Background(), ok))
	require.NoError(t, p.Do(context.Background(), ok))
	c.full.Store(true)
	require.ErrorIs(t, p.Do(context.Background(), ok), policy.ErrRejected)

	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_rejections_total Calls or attempts a stage rejected, by the stage's kind (policy), its name and why.
# TYPE backstop_rejections_total counter
backstop_rejections_total{name="users",pipeline="profile",policy="my_cache",reason="full"} 1
# HELP backstop_stage_capacity Entries a cache may hold.
# TYPE backstop_stage_capacity gauge
backstop_stage_capacity{name="users",policy="my_cache"} 8
# HELP backstop_stage_entries Entries in a cache.
# TYPE backstop_stage_entries gauge
backstop_stage_entries{name="users",policy="my_cache"} 2
`), "backstop_rejections_total", "backstop_stage_capacity", "backstop_stage_entries")
	require.NoError(t, err)
	count, sum := histogramAt(t, reg, "backstop_wait_seconds", map[string]string{"policy": myCacheKind, "name": "users"})
	require.Equal(t, uint64(2), count, "two calls held, then let through")
	require.InDelta(t, 0.5, sum, 1e-9, "250ms each")

	c.entries.Store(5)
	require.Equal(t, 5.0, sample(t, reg, "backstop_stage_entries", map[string]string{"policy": myCacheKind, "name": "users"}),
		"read again at the next scrape")
}

// otherCache is another third-party kind that publishes a gauge named as myCache's.
type otherCache struct{ myCache }

func (c *otherCache) Placement() policy.Placement { return policy.Placement{Kind: "other_cache"} }

func (c *otherCache) Gauges() []policy.Gauge {
	return []policy.Gauge{{Name: "entries", Help: "Another help text.", Value: func() float64 { return 3 }}}
}

// badGauges publishes a gauge whose name would not make a series name.
type badGauges struct{ myCache }

func (c *badGauges) Gauges() []policy.Gauge {
	return []policy.Gauge{{Name: "In Flight", Value: func() float64 { return 0 }}}
}

// TestObserver_AddStage: a stage in no pipeline is exported by AddStage, once per
// kind and name. Two kinds may publish a gauge of the same name; the family keeps
// the first help text. Bad gauges are refused whole.
func TestObserver_AddStage(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	c := &myCache{name: "users"}
	c.entries.Store(4)
	require.NoError(t, obs.AddStage(c))
	require.NoError(t, obs.AddStage(c), "the same stage again")
	require.ErrorIs(t, obs.AddStage(&myCache{name: "users"}), metrics.ErrInvalidOptions, "another my_cache under its name")
	require.NoError(t, obs.AddStage(&otherCache{myCache{name: "users"}}), "another kind, the same name")
	require.ErrorIs(t, obs.AddStage(&badGauges{myCache{name: "sessions"}}), metrics.ErrInvalidOptions, "a gauge named In Flight")
	require.ErrorIs(t, obs.AddStage(nil), metrics.ErrInvalidOptions)

	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_stage_entries Entries in a cache.
# TYPE backstop_stage_entries gauge
backstop_stage_entries{name="users",policy="my_cache"} 4
backstop_stage_entries{name="users",policy="other_cache"} 3
`), "backstop_stage_entries")
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	before := n
	require.NoError(t, obs.AddStage(&myCache{name: "sessions"}), "the bad stage's name is still free")
	n, err = testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, before+2, n, "two gauges more")
}

// myBreaker is a third-party breaker: it implements metrics.BreakerGauge, and its
// kind is not "breaker".
type myBreaker struct{ myCache }

func (b *myBreaker) Placement() policy.Placement { return policy.Placement{Kind: "my_breaker"} }
func (b *myBreaker) StateValue() float64         { return 2 }
func (b *myBreaker) Gauges() []policy.Gauge      { return nil }

// TestObserver_RegisterFindsSeriesByInterface: Register reads what a stage
// implements, not its kind. A BreakerGauge of another kind gets the breaker series.
func TestObserver_RegisterFindsSeriesByInterface(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	policy.Must(policy.Wrap(&myBreaker{myCache{name: "flaky"}}, policy.Observe(obs)))
	require.Equal(t, 2.0, sample(t, reg, "backstop_breaker_state", map[string]string{"breaker": "flaky"}), "open, read live")
	n, err := testutil.GatherAndCount(reg, "backstop_breaker_transitions_total")
	require.NoError(t, err)
	require.Equal(t, 6, n, "every pair of states, at 0")
}
