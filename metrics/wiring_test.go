package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/shed"
)

// counting is an observer that counts the events of each kind it hears.
type counting struct {
	mu sync.Mutex
	n  map[event.Kind]int
}

func (c *counting) Observe(e event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[event.Kind]int{}
	}
	c.n[e.Kind]++
}

func (c *counting) count(k event.Kind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// refuseEveryWay has s refuse one request by each way a shedder refuses: its
// middleware, Admit, and pipelines observed by obs, by another observer, by both, and
// by none. s admits one request at a time and queues none; a held permit fills it. It
// returns the refusals made.
func refuseEveryWay(t *testing.T, s *shed.Shedder, obs, other event.Observer) int {
	t.Helper()
	held, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	defer held.Release()
	rec := httptest.NewRecorder()
	shed.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), s).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.NotEqual(t, http.StatusOK, rec.Code, "the middleware refuses")
	_, why = s.Admit(context.Background(), shed.PriorityDefault)
	require.NotEqual(t, shed.ReasonNone, why, "Admit refuses")
	pipelines := []*policy.Pipeline{
		policy.Must(policy.Wrap(s, policy.Name("observed"), policy.Observe(obs))),
		policy.Must(policy.Wrap(s, policy.Name("other"))).With(policy.Observe(other)),
		policy.Must(policy.Wrap(s, policy.Name("both"), policy.Observe(event.Observers(other, obs)))),
		policy.Must(policy.Wrap(s, policy.Name("unobserved"))),
	}
	for _, p := range pipelines {
		require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return nil }), shed.ErrShed, p.String())
	}
	return 2 + len(pipelines)
}

// sumOf adds up the samples of a counter or histogram count family for one label.
func sumOf(t *testing.T, g prometheus.Gatherer, family, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var total float64
	found := false
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			has := false
			for _, l := range m.GetLabel() {
				has = has || l.GetName() == label && l.GetValue() == value
			}
			if !has {
				continue
			}
			found = true
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			}
		}
	}
	return total, found
}

// TestShedder_RegisteredOnceExportsEverySeries: however a shedder and the Observer
// meet — listed in Options.Shedders, added after with or without its
// Options.Observer set to the Observer (alone or combined), or only a stage of a
// pipeline the Observer observes — every one of its refusals is counted once in
// backstop_shed_requests_total and _retry_after_seconds, by whichever way it refused,
// and its gauges and admissions are exported: BackstopShedRateHigh can fire.
func TestShedder_RegisteredOnceExportsEverySeries(t *testing.T) {
	opts := func(o event.Observer) shed.Options {
		return shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Observer: o}
	}
	for _, c := range []struct {
		name string
		wire func(t *testing.T, reg prometheus.Registerer, other event.Observer) (*metrics.Observer, *shed.Shedder)
	}{
		{"shedder, then Options.Shedders", func(t *testing.T, reg prometheus.Registerer, _ event.Observer) (*metrics.Observer, *shed.Shedder) {
			s := policy.Must(shed.New(opts(nil)))
			return policy.Must(metrics.New(reg, metrics.Options{Shedders: map[string]metrics.ShedGauges{"api": s}})), s
		}},
		{"observer, shedder reporting to it, AddShedder", func(t *testing.T, reg prometheus.Registerer, _ event.Observer) (*metrics.Observer, *shed.Shedder) {
			obs := policy.Must(metrics.New(reg, metrics.Options{}))
			s := policy.Must(shed.New(opts(obs)))
			require.NoError(t, obs.AddShedder("api", s))
			return obs, s
		}},
		{"observer, shedder, AddShedder", func(t *testing.T, reg prometheus.Registerer, _ event.Observer) (*metrics.Observer, *shed.Shedder) {
			obs := policy.Must(metrics.New(reg, metrics.Options{}))
			s := policy.Must(shed.New(opts(nil)))
			require.NoError(t, obs.AddShedder("api", s))
			return obs, s
		}},
		{"shedder reporting to the observer among others, AddShedder twice", func(t *testing.T, reg prometheus.Registerer, other event.Observer) (*metrics.Observer, *shed.Shedder) {
			obs := policy.Must(metrics.New(reg, metrics.Options{}))
			s := policy.Must(shed.New(opts(event.Observers(obs, other))))
			require.NoError(t, obs.AddShedder("api", s))
			require.NoError(t, obs.AddShedder("api", s))
			return obs, s
		}},
		{"a stage of an observed pipeline, never registered", func(t *testing.T, reg prometheus.Registerer, _ event.Observer) (*metrics.Observer, *shed.Shedder) {
			obs := policy.Must(metrics.New(reg, metrics.Options{}))
			s := policy.Must(shed.New(opts(nil)))
			policy.Must(policy.Wrap(s, policy.Name("orders"), policy.Observe(obs)))
			return obs, s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			var other counting
			obs, s := c.wire(t, reg, &other)
			for _, g := range []string{"backstop_shed_inflight", "backstop_shed_limit", "backstop_shed_queue_length", "backstop_shed_admitted_total"} {
				_, ok := sumOf(t, reg, g, "shedder", "api")
				require.True(t, ok, "%s exported from the start", g)
			}
			n := refuseEveryWay(t, s, obs, &other)
			got, _ := sumOf(t, reg, "backstop_shed_requests_total", "shedder", "api")
			require.Equal(t, float64(n), got, "each refusal counted once")
			got, _ = sumOf(t, reg, "backstop_shed_retry_after_seconds", "shedder", "api")
			require.Equal(t, float64(n), got, "each Retry-After observed once")
			admitted, _ := sumOf(t, reg, "backstop_shed_admitted_total", "shedder", "api")
			require.Equal(t, 1.0, admitted)
			require.GreaterOrEqual(t, other.count(event.Shed), 2, "the other observer hears the pipelines it observes")
			problems, err := testutil.GatherAndLint(reg)
			require.NoError(t, err)
			require.Empty(t, problems)
		})
	}
}

// TestBreaker_ExportedWhenItsPipelineIsBound: a breaker inside a pipeline the Observer
// observes — alone, combined with another observer, or given one With at a time, and
// shared with a second observed pipeline — has backstop_breaker_state and its
// transitions at 0 as soon as the pipeline is bound, with no AddBreaker; its state is
// read live; a trip is counted once by the Observer and heard once by the other
// observer.
func TestBreaker_ExportedWhenItsPipelineIsBound(t *testing.T) {
	fail := func(context.Context) error { return errDown }
	for _, c := range []struct {
		name  string
		build func(b *breaker.Breaker, obs, other event.Observer) *policy.Pipeline
	}{
		{"Observe in Wrap", func(b *breaker.Breaker, obs, _ event.Observer) *policy.Pipeline {
			return policy.Must(policy.Wrap(b, policy.Name("db"), policy.Observe(obs)))
		}},
		{"combined", func(b *breaker.Breaker, obs, other event.Observer) *policy.Pipeline {
			return policy.Must(policy.Wrap(b, policy.Name("db"), policy.Observe(event.Observers(other, obs))))
		}},
		{"With chain", func(b *breaker.Breaker, obs, other event.Observer) *policy.Pipeline {
			return policy.Must(policy.Wrap(b)).With(policy.Observe(event.Observers(obs, other))).With(policy.Name("db"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			obs := policy.Must(metrics.New(reg, metrics.Options{}))
			var other counting
			b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
			p := c.build(b, obs, &other)
			second := policy.Must(policy.Wrap(b, policy.Name("db-reads"), policy.Observe(event.Observers(obs, &other))))
			state, ok := sumOf(t, reg, "backstop_breaker_state", "breaker", "db")
			require.True(t, ok, "exported when the pipeline is bound")
			require.Equal(t, 0.0, state)
			n, err := testutil.GatherAndCount(reg, "backstop_breaker_transitions_total")
			require.NoError(t, err)
			require.Equal(t, 6, n, "every transition at 0")

			_ = p.Do(context.Background(), fail)
			require.ErrorIs(t, second.Do(context.Background(), fail), breaker.ErrOpen)
			state, _ = sumOf(t, reg, "backstop_breaker_state", "breaker", "db")
			require.Equal(t, 2.0, state)
			trips, _ := sumOf(t, reg, "backstop_breaker_transitions_total", "breaker", "db")
			require.Equal(t, 1.0, trips, "one trip, counted once")
			if c.name != "Observe in Wrap" {
				require.Equal(t, 1, other.count(event.BreakerState), "heard once by the other observer")
			}
			b.Reset()
			state, _ = sumOf(t, reg, "backstop_breaker_state", "breaker", "db")
			require.Equal(t, 0.0, state, "read live")
		})
	}
}

// TestBreaker_AddedAndInNoPipeline: a breaker registered with Options.Breakers that
// guards a shedder's handler rather than a pipeline still has its transitions counted.
func TestBreaker_AddedAndInNoPipeline(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	b := policy.Must(breaker.New(breaker.Options{Name: "inventory", ConsecutiveFailures: 1}))
	policy.Must(metrics.New(reg, metrics.Options{Breakers: []metrics.BreakerGauge{b}}))
	b.ForceOpen()
	trips, _ := sumOf(t, reg, "backstop_breaker_transitions_total", "breaker", "inventory")
	require.Equal(t, 1.0, trips)
}
