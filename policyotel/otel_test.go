package policyotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("db down")

// recorded runs a call that fails twice then succeeds, inside a span, and returns the
// metrics and the span.
func setup(t *testing.T) (*policyotel.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := policyotel.New(mp)
	require.NoError(t, err)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return obs, reader, rec, tp
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, policyotel.Scope, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum returns the value of a counter's data point with exactly attrs.
func sum(t *testing.T, m metricdata.Metrics, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	want := attribute.NewSet(attrs...)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	t.Fatalf("%s has no point %v", m.Name, want.Encoded(attribute.DefaultEncoder()))
	return 0
}

func TestObserver_MetricsAndSpanEvents(t *testing.T) {
	obs, reader, rec, tp := setup(t)
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)})))).
		With(policy.Name("orders"), policy.Observe(obs))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /orders")
	calls := 0
	err := p.Do(ctx, func(context.Context) error {
		if calls++; calls < 3 {
			return fault.Retryable(errDown)
		}
		return nil
	})
	span.End()
	require.NoError(t, err)

	ms := collect(t, reader)
	pipeline := attribute.String("pipeline", "orders")
	require.Equal(t, int64(1), sum(t, ms["backstop.calls"], pipeline, attribute.String("outcome", "success")))
	require.Equal(t, int64(2), sum(t, ms["backstop.attempts"], pipeline, attribute.String("outcome", "failure")))
	require.Equal(t, int64(1), sum(t, ms["backstop.attempts"], pipeline, attribute.String("outcome", "success")))
	require.Equal(t, int64(2), sum(t, ms["backstop.retries"], pipeline, attribute.String("reason", "retryable")))
	require.Equal(t, "{call}", ms["backstop.calls"].Unit)
	require.Equal(t, "s", ms["backstop.call.duration"].Unit)
	h := ms["backstop.call.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, h, 1)
	require.Equal(t, uint64(1), h[0].Count)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	var names []string
	var resends []int64
	for _, ev := range spans[0].Events() {
		names = append(names, ev.Name)
		for _, a := range ev.Attributes {
			if a.Key == "http.request.resend_count" {
				resends = append(resends, a.Value.AsInt64())
			}
		}
	}
	require.Equal(t, []string{"backstop.attempt", "backstop.retry", "backstop.attempt", "backstop.retry", "backstop.attempt"}, names)
	require.Equal(t, []int64{1, 2}, resends, "the HTTP semantic convention's resend count on each resend")
}

func TestObserver_SuppressionBreakerAndShed(t *testing.T) {
	obs, reader, rec, tp := setup(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "handler")
	inner := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3})))).With(policy.Name("db"), policy.Observe(obs))
	_ = inner.Do(callpath.WithUpstreamAttempt(ctx, 2), func(context.Context) error { return fault.Retryable(errDown) })

	brk := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	bp := policy.Must(policy.Wrap(brk)).With(policy.Name("db-breaker"), policy.Observe(obs))
	_ = bp.Do(ctx, func(context.Context) error { return errDown })
	require.ErrorIs(t, bp.Do(ctx, func(context.Context) error { return nil }), policy.ErrRejected)

	s := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Rand: policytest.NewRand(0)}))
	held, _ := s.Admit(context.Background(), shed.PriorityDefault)
	sp := policy.Must(policy.Wrap(s)).With(policy.Name("consumer"), policy.Observe(obs))
	_ = sp.Do(ctx, func(context.Context) error { return nil })
	held.Release()
	span.End()

	ms := collect(t, reader)
	require.Equal(t, int64(1), sum(t, ms["backstop.retries.suppressed"], attribute.String("pipeline", "db"), attribute.String("reason", "owner")))
	require.Equal(t, int64(1), sum(t, ms["backstop.breaker.transitions"], attribute.String("breaker", "db"),
		attribute.String("from", "closed"), attribute.String("to", "open")))
	g := ms["backstop.breaker.state"].Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, g, 1)
	require.Equal(t, int64(2), g[0].Value)
	require.Equal(t, int64(1), sum(t, ms["backstop.shed.requests"], attribute.String("shedder", "api"),
		attribute.String("reason", "limit"), attribute.String("priority", "default")))
	var names, refused []string
	for _, ev := range rec.Ended()[0].Events() {
		names = append(names, ev.Name)
		if ev.Name == "backstop.call.rejected" {
			for _, kv := range ev.Attributes {
				if kv.Key == "pipeline" {
					refused = append(refused, kv.Value.AsString())
				}
			}
		}
	}
	require.Contains(t, names, "backstop.retry.suppressed")
	require.Contains(t, names, "backstop.shed")
	require.Equal(t, []string{"db-breaker", "consumer"}, refused, "the open breaker's refusal and the shed, one event each")
	for _, m := range ms {
		for _, kv := range attrsOf(m) {
			require.NotEqual(t, "error", string(kv.Key), "no error text as an attribute")
		}
	}
}

func attrsOf(m metricdata.Metrics) []attribute.KeyValue {
	var out []attribute.KeyValue
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes.ToSlice()...)
		}
	}
	return out
}

func TestNew_NeedsAMeterProvider(t *testing.T) {
	_, err := policyotel.New(nil)
	require.ErrorContains(t, err, "MeterProvider is nil")
}

// TestObserver_BudgetAndShedderGauges: added budgets and shedders are read at every
// collection, by name; another source under a name, or a nil source, is refused.
func TestObserver_BudgetAndShedderGauges(t *testing.T) {
	obs, reader, _, _ := setup(t)
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	s := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 4}, Queue: shed.QueueOptions{Max: -1}}))
	require.NoError(t, obs.AddBudget("orders", b))
	require.NoError(t, obs.AddShedder("api", s))
	require.NoError(t, obs.AddBudget("orders", b), "the same budget again")
	require.NoError(t, obs.AddShedder("api", s), "the same shedder again")
	require.Error(t, obs.AddBudget("orders", policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 1, TokenRatio: 1}))), "another budget under the name")
	require.Error(t, obs.AddShedder("api", policy.Must(shed.New(shed.Options{Name: "api"}))), "another shedder under the name")
	require.Error(t, obs.AddShedder("web", s), "a name not the shedder's own")
	require.Error(t, obs.AddBudget("x", nil))
	require.Error(t, obs.AddShedder("x", nil))

	held, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	b.OnFailure()
	ms := collect(t, reader)
	held.Release()

	level := ms["backstop.budget.level"].Data.(metricdata.Gauge[float64]).DataPoints
	require.Len(t, level, 1)
	require.Equal(t, 9.0, level[0].Value)
	require.Equal(t, "{retry}", ms["backstop.budget.level"].Unit)
	require.Equal(t, int64(1), shedGauge(t, ms, "backstop.shed.inflight"))
	require.Equal(t, int64(4), shedGauge(t, ms, "backstop.shed.limit"))
	require.Equal(t, int64(0), shedGauge(t, ms, "backstop.shed.queue_length"))
	require.Equal(t, int64(1), sum(t, ms["backstop.shed.admitted"], attribute.String("shedder", "api")))

	require.Equal(t, int64(0), shedGauge(t, collect(t, reader), "backstop.shed.inflight"), "read again at the next collection")
}

// shedGauge returns the one point of an int gauge, which must be shedder "api"'s.
func shedGauge(t *testing.T, ms map[string]metricdata.Metrics, name string) int64 {
	t.Helper()
	dps := ms[name].Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, dps, 1, name)
	v, _ := dps[0].Attributes.Value("shedder")
	require.Equal(t, "api", v.AsString(), name)
	require.Equal(t, "{request}", ms[name].Unit, name)
	return dps[0].Value
}

// TestObserver_ARefusalUnderARetryIsTypedByTheRefusal: a breaker open inside a retry
// ends the call with the retry's error; the span event's error.type is still the
// refusing stage's kind, "breaker", not *retry.Error.
func TestObserver_ARefusalUnderARetryIsTypedByTheRefusal(t *testing.T) {
	obs, _, rec, tp := setup(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "handler")
	brk := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Base: time.Nanosecond, Cap: time.Nanosecond})), brk)).
		With(policy.Name("db"), policy.Observe(obs))
	_ = p.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) }) // trips the breaker; the retry is refused
	span.End()
	var types []string
	for _, ev := range rec.Ended()[0].Events() {
		if ev.Name == "backstop.call.rejected" {
			for _, kv := range ev.Attributes {
				if kv.Key == "error.type" {
					types = append(types, kv.Value.AsString())
				}
			}
		}
	}
	require.Equal(t, []string{breaker.Kind}, types)
}

// TestObserver_HalfOpenIsState1: a transition to "half_open", as breakers name the
// state, records 1.
func TestObserver_HalfOpenIsState1(t *testing.T) {
	obs, reader, _, _ := setup(t)
	obs.Observe(event.Event{Kind: event.BreakerState, Source: "db", From: "open", To: "half_open"})
	g := collect(t, reader)["backstop.breaker.state"].Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, g, 1)
	require.Equal(t, int64(1), g[0].Value)
}
