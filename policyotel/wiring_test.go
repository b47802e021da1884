package policyotel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/shed"
)

// shedTotal adds up backstop.shed.requests for one shedder.
func shedTotal(ms map[string]metricdata.Metrics, shedder string) int64 {
	m, ok := ms["backstop.shed.requests"]
	if !ok {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := dp.Attributes.Value("shedder"); ok && v.AsString() == shedder {
			n += dp.Value
		}
	}
	return n
}

// TestShedder_AddedOnceRecordsEveryRefusalOnce: a shedder added once — after it was
// built reporting to the Observer, built with no observer, or only a stage of a
// pipeline the Observer observes — has each refusal recorded once, by its middleware,
// Admit, and pipelines observed by the Observer, by it among others, and by none.
func TestShedder_AddedOnceRecordsEveryRefusalOnce(t *testing.T) {
	opts := func(o event.Observer) shed.Options {
		return shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Observer: o}
	}
	for _, c := range []struct {
		name string
		wire func(obs *policyotel.Observer) *shed.Shedder
	}{
		{"reporting to the Observer, then added", func(obs *policyotel.Observer) *shed.Shedder {
			s := policy.Must(shed.New(opts(obs)))
			require.NoError(t, obs.AddShedder("api", s))
			return s
		}},
		{"added, reporting to no one", func(obs *policyotel.Observer) *shed.Shedder {
			s := policy.Must(shed.New(opts(nil)))
			require.NoError(t, obs.AddShedder("api", s))
			return s
		}},
		{"a stage of an observed pipeline", func(obs *policyotel.Observer) *shed.Shedder {
			s := policy.Must(shed.New(opts(nil)))
			policy.Must(policy.Wrap(s, policy.Observe(event.Observers(obs))))
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs, reader, _, _ := setup(t)
			s := c.wire(obs)
			held, why := s.Admit(context.Background(), shed.PriorityDefault)
			require.Equal(t, shed.ReasonNone, why)
			rec := httptest.NewRecorder()
			shed.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), s).
				ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			require.NotEqual(t, http.StatusOK, rec.Code)
			_, why = s.Admit(context.Background(), shed.PriorityDefault)
			require.NotEqual(t, shed.ReasonNone, why)
			var other event.ObserverFunc = func(event.Event) {}
			for _, p := range []*policy.Pipeline{
				policy.Must(policy.Wrap(s, policy.Name("a"), policy.Observe(obs))),
				policy.Must(policy.Wrap(s, policy.Name("b"), policy.Observe(event.Observers(other, obs)))),
				policy.Must(policy.Wrap(s, policy.Name("c"))),
			} {
				require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return nil }), shed.ErrShed)
			}
			held.Release()
			ms := collect(t, reader)
			require.Equal(t, int64(5), shedTotal(ms, "api"), "each refusal once")
			g := ms["backstop.shed.limit"].Data.(metricdata.Gauge[int64]).DataPoints
			require.Len(t, g, 1, "the gauges are exported")
			require.Equal(t, int64(1), g[0].Value)
		})
	}
}

// TestBreaker_StateRecordedWhenItsPipelineIsBound: backstop.breaker.state has a point
// for a breaker in an observed pipeline as soon as the pipeline is bound, and a trip
// heard through two pipelines and a With chain is counted once.
func TestBreaker_StateRecordedWhenItsPipelineIsBound(t *testing.T) {
	obs, reader, _, _ := setup(t)
	b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	p := policy.Must(policy.Wrap(b)).With(policy.Observe(event.Observers(obs))).With(policy.Name("db"))
	reads := policy.Must(policy.Wrap(b, policy.Name("db-reads"), policy.Observe(obs)))
	g := collect(t, reader)["backstop.breaker.state"].Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, g, 1)
	require.Equal(t, int64(0), g[0].Value)

	_ = p.Do(context.Background(), func(context.Context) error { return errDown })
	require.ErrorIs(t, reads.Do(context.Background(), func(context.Context) error { return nil }), breaker.ErrOpen)
	ms := collect(t, reader)
	require.Equal(t, int64(1), sum(t, ms["backstop.breaker.transitions"], attribute.String("breaker", "db"),
		attribute.String("from", "closed"), attribute.String("to", "open")), "one trip, once")
	require.Equal(t, int64(2), ms["backstop.breaker.state"].Data.(metricdata.Gauge[int64]).DataPoints[0].Value)
}
