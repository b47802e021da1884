package policyotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
)

// TestObserver_RejectionsWaitsAndPublishedGauges: a bulkhead's and a rate limiter's
// refusals are counted in backstop.rejections, waits timed in backstop.wait, and
// their published gauges read as backstop.stage.*, each with policy and name.
func TestObserver_RejectionsWaitsAndPublishedGauges(t *testing.T) {
	obs, reader, rec, tp := setup(t)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	fb := policy.Must(fallback.New(fallback.Options[int]{Name: "prices", Value: -1}))
	rl := policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 10, Burst: 1, MaxWait: 150 * time.Millisecond, Clock: clock}))
	p := policy.Must(policy.Wrap(fb, rl, policy.Name("shop"), policy.Observe(obs)))

	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /prices")
	ok := func(context.Context) (int, error) { return 1, nil }
	_, err := fb.Get(ctx, p, ok) // the one token
	require.NoError(t, err)
	_, err = fb.Get(ctx, p, ok) // waits 100ms for the next
	require.NoError(t, err)
	// A call holds the bulkhead's one slot; the next is refused, and answered.
	bh := policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 1}))
	bp := policy.Must(policy.Wrap(fb, bh, policy.Name("shop-bh"), policy.Observe(obs)))
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = fb.Get(context.Background(), bp, func(context.Context) (int, error) { close(in); <-release; return 1, nil })
	}()
	<-in
	require.Equal(t, 1.0, gauge(t, collect(t, reader)["backstop.stage.inflight"], attribute.String("policy", bulkhead.Kind),
		attribute.String("name", "prices")), "the slot held now")
	v, err := fb.Get(ctx, bp, ok)
	require.NoError(t, err)
	require.Equal(t, -1, v)
	close(release)
	<-done
	refuse := policy.Must(ratelimit.New(ratelimit.Options{Name: "geo", Rate: 1, Burst: 1, Mode: ratelimit.Refuse, Clock: policytest.NewClock(time.Time{})}))
	rp := policy.Must(policy.Wrap(refuse, policy.Name("geo"), policy.Observe(obs)))
	require.NoError(t, rp.Do(ctx, func(context.Context) error { return nil }))
	require.ErrorIs(t, rp.Do(ctx, func(context.Context) error { return nil }), ratelimit.ErrLimited)
	span.End()

	ms := collect(t, reader)
	require.Equal(t, int64(1), sum(t, ms["backstop.rejections"], attribute.String("pipeline", "shop-bh"),
		attribute.String("policy", bulkhead.Kind), attribute.String("name", "prices"), attribute.String("reason", "limit")))
	require.Equal(t, int64(1), sum(t, ms["backstop.fallbacks"], attribute.String("pipeline", "shop-bh"),
		attribute.String("fallback", "prices"), attribute.String("reason", "rejected"), attribute.String("from", "value")))
	require.Equal(t, int64(1), sum(t, ms["backstop.rejections"], attribute.String("pipeline", "geo"),
		attribute.String("policy", ratelimit.Kind), attribute.String("name", "geo"), attribute.String("reason", "no_token")))
	require.Len(t, ms["backstop.rejections"].Data.(metricdata.Sum[int64]).DataPoints, 2, "one point per stage and reason")
	h := ms["backstop.wait"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, h, 1)
	require.Equal(t, attribute.NewSet(attribute.String("policy", ratelimit.Kind), attribute.String("name", "prices")), h[0].Attributes)
	require.Equal(t, uint64(1), h[0].Count)
	require.InDelta(t, 0.1, h[0].Sum, 1e-9)
	bulkheadOf := []attribute.KeyValue{attribute.String("policy", bulkhead.Kind), attribute.String("name", "prices")}
	require.Equal(t, 0.0, gauge(t, ms["backstop.stage.inflight"], bulkheadOf...))
	require.Equal(t, 1.0, gauge(t, ms["backstop.stage.limit"], bulkheadOf...))
	require.Equal(t, 0.0, gauge(t, ms["backstop.stage.waiting"], bulkheadOf...))
	require.Len(t, ms["backstop.stage.tokens"].Data.(metricdata.Gauge[float64]).DataPoints, 2, "prices and geo")

	spans := rec.Ended()
	require.Len(t, spans, 1)
	var names []string
	for _, ev := range spans[0].Events() {
		names = append(names, ev.Name)
	}
	require.Equal(t, []string{"backstop.wait", "backstop.rejected", "backstop.fallback",
		"backstop.rejected", "backstop.call.rejected"}, names)
	require.Contains(t, spans[0].Events()[1].Attributes, attribute.String("policy", bulkhead.Kind))
	require.Contains(t, spans[0].Events()[1].Attributes, attribute.String("backstop.reason", "limit"))
	require.Contains(t, spans[0].Events()[4].Attributes, attribute.String("error.type", ratelimit.Kind))
}

// gauge returns the value of a float gauge's data point with exactly attrs.
func gauge(t *testing.T, m metricdata.Metrics, attrs ...attribute.KeyValue) float64 {
	t.Helper()
	want := attribute.NewSet(attrs...)
	g, ok := m.Data.(metricdata.Gauge[float64])
	require.True(t, ok, "%q is a float gauge", m.Name)
	for _, dp := range g.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	t.Fatalf("%s has no point %v", m.Name, want.Encoded(attribute.DefaultEncoder()))
	return 0
}

// myCache is a stage written outside Backstop, as a user would write one. It
// publishes two gauges, and rejects calls while full.
type myCache struct {
	name    string
	entries atomic.Int64
	full    atomic.Bool
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
		c.entries.Add(1)
		return next.Run(ctx, fn)
	})
}

// TestObserver_AThirdPartyStageGetsTheInstrumentsABuiltInOneGets: a stage
// policyotel has never heard of, inside an observed pipeline, has its gauges read
// as backstop.stage.<gauge>{policy="my_cache"}, and its rejections counted in
// backstop.rejections and added to the span.
func TestObserver_AThirdPartyStageGetsTheInstrumentsABuiltInOneGets(t *testing.T) {
	obs, reader, rec, tp := setup(t)
	c := &myCache{name: "users"}
	p := policy.Must(policy.Wrap(c, policy.Name("profile"), policy.Observe(obs)))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /profile")
	ok := func(context.Context) error { return nil }
	require.NoError(t, p.Do(ctx, ok))
	require.NoError(t, p.Do(ctx, ok))
	c.full.Store(true)
	require.ErrorIs(t, p.Do(ctx, ok), policy.ErrRejected)
	span.End()

	ms := collect(t, reader)
	users := []attribute.KeyValue{attribute.String("policy", myCacheKind), attribute.String("name", "users")}
	require.Equal(t, 2.0, gauge(t, ms["backstop.stage.entries"], users...))
	require.Equal(t, 8.0, gauge(t, ms["backstop.stage.capacity"], users...))
	require.Equal(t, "Entries in a cache.", ms["backstop.stage.entries"].Description)
	require.Equal(t, int64(1), sum(t, ms["backstop.rejections"], attribute.String("pipeline", "profile"),
		attribute.String("policy", myCacheKind), attribute.String("name", "users"), attribute.String("reason", "full")))
	var names []string
	for _, ev := range rec.Ended()[0].Events() {
		names = append(names, ev.Name)
	}
	require.Equal(t, []string{"backstop.rejected", "backstop.call.rejected"}, names)

	c.entries.Store(5)
	require.Equal(t, 5.0, gauge(t, collect(t, reader)["backstop.stage.entries"], users...), "read again at the next collection")
}

// otherCache is another third-party kind that publishes a gauge named as myCache's.
type otherCache struct{ myCache }

func (c *otherCache) Placement() policy.Placement { return policy.Placement{Kind: "other_cache"} }

func (c *otherCache) Gauges() []policy.Gauge {
	return []policy.Gauge{{Name: "entries", Help: "Another description.", Value: func() float64 { return 3 }}}
}

// badGauges publishes a gauge whose name would not make an instrument name.
type badGauges struct{ myCache }

func (c *badGauges) Gauges() []policy.Gauge {
	return []policy.Gauge{{Name: "In Flight", Value: func() float64 { return 0 }}}
}

// TestObserver_AddStage: a stage in no pipeline is added by AddStage, once per kind
// and name; two kinds share an instrument when they publish a gauge of one name.
func TestObserver_AddStage(t *testing.T) {
	obs, reader, _, _ := setup(t)
	c := &myCache{name: "users"}
	c.entries.Store(4)
	require.NoError(t, obs.AddStage(c))
	require.NoError(t, obs.AddStage(c), "the same stage again")
	require.Error(t, obs.AddStage(&myCache{name: "users"}), "another my_cache under its name")
	require.NoError(t, obs.AddStage(&otherCache{myCache{name: "users"}}), "another kind, the same name")
	require.Error(t, obs.AddStage(&badGauges{myCache{name: "sessions"}}), "a gauge named In Flight")
	require.Error(t, obs.AddStage(nil))

	ms := collect(t, reader)
	require.Equal(t, 4.0, gauge(t, ms["backstop.stage.entries"], attribute.String("policy", myCacheKind), attribute.String("name", "users")))
	require.Equal(t, 3.0, gauge(t, ms["backstop.stage.entries"], attribute.String("policy", "other_cache"), attribute.String("name", "users")))
	require.Len(t, ms["backstop.stage.entries"].Data.(metricdata.Gauge[float64]).DataPoints, 2)
	require.Equal(t, "Entries in a cache.", ms["backstop.stage.entries"].Description, "the first description")
}
