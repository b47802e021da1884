package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("db down")

// drive runs 3 calls through Wrap(breaker, budget, retry) with a fake clock: one that
// succeeds at once, one that succeeds on its 3rd attempt, one that gives up after 3.
func drive(t *testing.T, obs event.Observer) (*budget.TokenBucket, *breaker.Breaker) {
	t.Helper()
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	bud, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 100, TokenRatio: 1})
	require.NoError(t, err)
	brk, err := breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1})
	require.NoError(t, err)
	rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))
	p := policy.Must(policy.Wrap(brk, bud, rt)).With(policy.Name("orders"), policy.Observe(obs), policy.UseClock(clock))
	ctx := context.Background()
	require.NoError(t, p.Do(ctx, func(context.Context) error { return nil }))
	n := 0
	require.NoError(t, p.Do(ctx, func(context.Context) error {
		if n++; n < 3 {
			return fault.Retryable(errDown)
		}
		return nil
	}))
	require.Error(t, p.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) }))
	// The failed call opened the breaker: the next one is refused.
	require.ErrorIs(t, p.Do(ctx, func(context.Context) error { return nil }), breaker.ErrOpen)
	return bud, brk
}

func TestObserver_CountsEveryEvent(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := metrics.New(reg, metrics.Options{})
	require.NoError(t, err)
	drive(t, obs)

	// Calls: 2 successes, 1 failure, then 1 rejected. Attempts: 1 + 3 + 3 = 7, of which
	// 2 succeeded. Retries: 2 + 2 = 4. The breaker, outside the retry, counts calls:
	// the failed call opened it, once. The breaker is registered by the pipeline it is
	// in: its transitions exist at 0 from the moment the pipeline is bound.
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_attempts_total Attempts a pipeline's retry made, by outcome.
# TYPE backstop_attempts_total counter
backstop_attempts_total{outcome="canceled",pipeline="orders"} 0
backstop_attempts_total{outcome="deadline",pipeline="orders"} 0
backstop_attempts_total{outcome="failure",pipeline="orders"} 5
backstop_attempts_total{outcome="rejected",pipeline="orders"} 0
backstop_attempts_total{outcome="success",pipeline="orders"} 2
# HELP backstop_breaker_state A breaker's state: 0 closed, 1 half-open, 2 open (read at scrape for registered breakers, else after the last change).
# TYPE backstop_breaker_state gauge
backstop_breaker_state{breaker="db"} 2
# HELP backstop_breaker_transitions_total Breaker state changes.
# TYPE backstop_breaker_transitions_total counter
backstop_breaker_transitions_total{breaker="db",from="closed",to="half_open"} 0
backstop_breaker_transitions_total{breaker="db",from="closed",to="open"} 1
backstop_breaker_transitions_total{breaker="db",from="half_open",to="closed"} 0
backstop_breaker_transitions_total{breaker="db",from="half_open",to="open"} 0
backstop_breaker_transitions_total{breaker="db",from="open",to="closed"} 0
backstop_breaker_transitions_total{breaker="db",from="open",to="half_open"} 0
# HELP backstop_calls_total Calls that left a pipeline, by outcome (success, failure, rejected, canceled, deadline).
# TYPE backstop_calls_total counter
backstop_calls_total{outcome="canceled",pipeline="orders"} 0
backstop_calls_total{outcome="deadline",pipeline="orders"} 0
backstop_calls_total{outcome="failure",pipeline="orders"} 1
backstop_calls_total{outcome="rejected",pipeline="orders"} 1
backstop_calls_total{outcome="success",pipeline="orders"} 2
# HELP backstop_retries_total Retries scheduled, by why the error was retryable (retryable, hint, throttle, timeout, network, custom, hedge).
# TYPE backstop_retries_total counter
backstop_retries_total{pipeline="orders",reason="custom"} 0
backstop_retries_total{pipeline="orders",reason="hedge"} 0
backstop_retries_total{pipeline="orders",reason="hint"} 0
backstop_retries_total{pipeline="orders",reason="network"} 0
backstop_retries_total{pipeline="orders",reason="retryable"} 4
backstop_retries_total{pipeline="orders",reason="throttle"} 0
backstop_retries_total{pipeline="orders",reason="timeout"} 0
`), "backstop_attempts_total", "backstop_breaker_state", "backstop_breaker_transitions_total", "backstop_calls_total", "backstop_retries_total")
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "backstop_call_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 1, n, "one duration series, for pipeline orders")
}

func TestObserver_SuppressionsGaugesAndShed(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.5}))
	s := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Rand: zero{}}))
	obs, err := metrics.New(reg, metrics.Options{Budgets: map[string]metrics.Leveler{"db": bud}})
	require.NoError(t, err)
	require.NoError(t, obs.AddShedder("api", s))
	require.NoError(t, obs.AddShedder("api", s), "the same shedder again")
	require.ErrorIs(t, obs.AddShedder("api", policy.Must(shed.New(shed.Options{Name: "api"}))), metrics.ErrInvalidOptions, "another shedder under the name")
	require.ErrorIs(t, obs.AddShedder("web", s), metrics.ErrInvalidOptions, "a name not the shedder's own")
	require.NoError(t, obs.AddBudget("db", bud), "the same budget again")
	require.ErrorIs(t, obs.AddBudget("db", policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 1, TokenRatio: 1}))), metrics.ErrInvalidOptions, "another budget under the name")

	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	inner := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: clock})))).With(policy.Name("inner"), policy.Observe(obs))
	outer := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Clock: clock})))).With(policy.Name("outer"), policy.Observe(obs))
	_ = outer.Do(context.Background(), func(ctx context.Context) error {
		return inner.Do(ctx, func(context.Context) error { return fault.Retryable(errDown) })
	})
	bud.OnFailure()

	permit, _ := s.Admit(context.Background(), shed.PriorityDefault)
	sp := policy.Must(policy.Wrap(s)).With(policy.Name("consumer"))
	_ = sp.Do(context.Background(), func(context.Context) error { return nil })
	sObs := policy.Must(shed.New(shed.Options{Name: "api2", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}, Observer: obs, Rand: zero{}}))
	p2, _ := sObs.Admit(context.Background(), shed.PriorityDefault)
	_, why := sObs.Admit(context.Background(), shed.PrioritySheddable)
	require.Equal(t, shed.ReasonPriority, why)

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_budget_level What a retry budget has left: tokens for a token bucket, retries that may start now otherwise.
# TYPE backstop_budget_level gauge
backstop_budget_level{budget="db"} 9
# HELP backstop_retries_suppressed_total Retries that would have happened and did not, by why (owner, budget, deadline, hint).
# TYPE backstop_retries_suppressed_total counter
backstop_retries_suppressed_total{pipeline="inner",why="budget"} 0
backstop_retries_suppressed_total{pipeline="inner",why="deadline"} 0
backstop_retries_suppressed_total{pipeline="inner",why="hint"} 0
backstop_retries_suppressed_total{pipeline="inner",why="owner"} 2
backstop_retries_suppressed_total{pipeline="outer",why="budget"} 0
backstop_retries_suppressed_total{pipeline="outer",why="deadline"} 0
backstop_retries_suppressed_total{pipeline="outer",why="hint"} 0
backstop_retries_suppressed_total{pipeline="outer",why="owner"} 0
# HELP backstop_shed_inflight Requests a shedder has admitted and not yet released.
# TYPE backstop_shed_inflight gauge
backstop_shed_inflight{shedder="api"} 1
# HELP backstop_shed_limit A shedder's current concurrency limit.
# TYPE backstop_shed_limit gauge
backstop_shed_limit{shedder="api"} 1
# HELP backstop_shed_queue_length Requests waiting in a shedder's queue.
# TYPE backstop_shed_queue_length gauge
backstop_shed_queue_length{shedder="api"} 0
# HELP backstop_shed_requests_total Requests a shedder refused, by reason and priority.
# TYPE backstop_shed_requests_total counter
backstop_shed_requests_total{priority="default",reason="limit",shedder="api"} 1
backstop_shed_requests_total{priority="sheddable",reason="priority",shedder="api2"} 1
`), "backstop_budget_level", "backstop_retries_suppressed_total", "backstop_shed_inflight", "backstop_shed_limit",
		"backstop_shed_queue_length", "backstop_shed_requests_total")
	require.NoError(t, err, "api's refusal in a pipeline with no observer is counted: AddShedder alone exports it")
	n, err := testutil.GatherAndCount(reg, "backstop_shed_retry_after_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	permit.Release()
	p2.Release()
}

type zero struct{}

func (zero) Float64() float64 { return 0 }

func TestObserver_LintAndDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs, err := metrics.New(reg, metrics.Options{NativeHistograms: 1.1})
	require.NoError(t, err)
	drive(t, obs)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems, "promlint")

	_, err = metrics.New(reg, metrics.Options{})
	var are prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &are, "a second Observer on one registry")

	_, err = metrics.New(nil, metrics.Options{})
	require.ErrorIs(t, err, metrics.ErrInvalidOptions)
	_, err = metrics.New(prometheus.NewRegistry(), metrics.Options{NativeHistograms: 0.5})
	require.ErrorIs(t, err, metrics.ErrInvalidOptions)
}

func TestSlog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	drive(t, metrics.Slog(logger, slog.LevelInfo))
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 5, "4 retries scheduled and 1 breaker change")
	require.Equal(t, map[string]any{"level": "INFO", "msg": "retry scheduled", "pipeline": "orders", "attempt": 2.0,
		"delay": lines[0]["delay"], "reason": "retryable", "error": "db down"}, lines[0])
	require.Equal(t, map[string]any{"level": "INFO", "msg": "breaker state changed", "breaker": "db", "from": "closed",
		"to": "open", "pipeline": "orders"}, lines[4])

	buf.Reset()
	drive(t, metrics.Slog(logger, slog.LevelDebug))
	require.Empty(t, buf.String(), "below the handler's level nothing is logged")
}

func BenchmarkPipeline_Unobserved(b *testing.B) { bench(b, nil, true) }

func BenchmarkPipeline_Observed(b *testing.B) {
	obs := policy.Must(metrics.New(prometheus.NewRegistry(), metrics.Options{}))
	bench(b, obs, true)
}

func BenchmarkPipeline_UnobservedSerial(b *testing.B) { bench(b, nil, false) }

func BenchmarkPipeline_ObservedSerial(b *testing.B) {
	obs := policy.Must(metrics.New(prometheus.NewRegistry(), metrics.Options{}))
	bench(b, obs, false)
}

// bench runs the success path of Wrap(breaker, budget, retry), observed by obs.
func bench(b *testing.B, obs event.Observer, parallel bool) {
	brk := policy.Must(breaker.New(breaker.Options{Name: "db"}))
	bud := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	p := policy.Must(policy.Wrap(brk, bud, policy.Must(retry.New(retry.Options{})))).With(policy.Name("orders"), policy.Observe(obs))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			_ = p.Do(ctx, fn)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = p.Do(ctx, fn)
		}
	})
}

func TestOptions_ShedderAndBudgetGauges(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := policy.Must(shed.New(shed.Options{Name: "edge", Limit: shed.LimitOptions{Fixed: 7}}))
	bud := policy.Must(budget.NewRatio(budget.RatioOptions{}))
	_, err := metrics.New(reg, metrics.Options{
		Budgets:  map[string]metrics.Leveler{"users": bud},
		Shedders: map[string]metrics.ShedGauges{"edge": s},
	})
	require.NoError(t, err)
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_budget_level What a retry budget has left: tokens for a token bucket, retries that may start now otherwise.
# TYPE backstop_budget_level gauge
backstop_budget_level{budget="users"} 100
# HELP backstop_shed_limit A shedder's current concurrency limit.
# TYPE backstop_shed_limit gauge
backstop_shed_limit{shedder="edge"} 7
`), "backstop_budget_level", "backstop_shed_limit")
	require.NoError(t, err)

	// A failed registration leaves nothing behind: the same names fail again whole.
	_, err = metrics.New(reg, metrics.Options{})
	require.Error(t, err)
	n, err := testutil.GatherAndCount(reg, "backstop_calls_total")
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestObserver_SeriesFromTheStart: before anything happens a registered breaker
// shows its state and 0 transitions, a bound pipeline 0 retries; after an operator's
// Reset the gauge is right again; a transition heard through two pipelines sharing
// the breaker is counted once.
func TestObserver_SeriesFromTheStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	brk := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
	obs := policy.Must(metrics.New(reg, metrics.Options{Breakers: []metrics.BreakerGauge{brk}}))
	a := policy.Must(policy.Wrap(brk)).With(policy.Name("a"), policy.Observe(obs))
	policy.Must(policy.Wrap(brk)).With(policy.Name("b"), policy.Observe(obs))

	state := func() float64 {
		t.Helper()
		return testutil.ToFloat64(gaugeOf(t, reg, "backstop_breaker_state", "breaker", "db"))
	}
	require.Equal(t, 0.0, state(), "a healthy breaker has a series before any change")
	n, err := testutil.GatherAndCount(reg, "backstop_breaker_transitions_total")
	require.NoError(t, err)
	require.Equal(t, 6, n, "every from → to pair at 0")
	n, err = testutil.GatherAndCount(reg, "backstop_retries_total", "backstop_retries_suppressed_total")
	require.NoError(t, err)
	require.Equal(t, 2*7+2*4, n, "pipelines a and b: 7 retry reasons and 4 suppression reasons each, at 0")

	_ = a.Do(context.Background(), func(context.Context) error { return errDown })
	require.Equal(t, 2.0, state())
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_breaker_transitions_total Breaker state changes.
# TYPE backstop_breaker_transitions_total counter
backstop_breaker_transitions_total{breaker="db",from="closed",to="half_open"} 0
backstop_breaker_transitions_total{breaker="db",from="closed",to="open"} 1
backstop_breaker_transitions_total{breaker="db",from="half_open",to="closed"} 0
backstop_breaker_transitions_total{breaker="db",from="half_open",to="open"} 0
backstop_breaker_transitions_total{breaker="db",from="open",to="closed"} 0
backstop_breaker_transitions_total{breaker="db",from="open",to="half_open"} 0
`), "backstop_breaker_transitions_total")
	require.NoError(t, err, "one trip, heard by pipelines a and b, counted once")

	brk.Reset()
	require.Equal(t, 0.0, state(), "the gauge follows an operator's Reset")
	require.NoError(t, obs.AddBreaker(brk), "the same breaker again")
	require.ErrorIs(t, obs.AddBreaker(policy.Must(breaker.New(breaker.Options{Name: "db"}))), metrics.ErrInvalidOptions, "another breaker under its name")
}

// gaugeOf returns the collector-independent value of one series, for testutil.
func gaugeOf(t *testing.T, g prometheus.Gatherer, name, label, value string) prometheus.Collector {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "copy"})
					gauge.Set(m.GetGauge().GetValue())
					return gauge
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return nil
}

type fakeCache struct{}

func (fakeCache) CacheCounts() (hits, misses, coalesced, refreshes, stale, loadErrors uint64) {
	return 10, 3, 2, 4, 1, 1
}

func TestObserver_AddCache(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	require.NoError(t, obs.AddCache("users", fakeCache{}))
	require.Error(t, obs.AddCache("users", fakeCache{}), "a name exported twice")
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP backstop_cache_requests_total Gets of a coalescing cache, by result (hit, miss, coalesced, stale).
# TYPE backstop_cache_requests_total counter
backstop_cache_requests_total{cache="users",result="coalesced"} 2
backstop_cache_requests_total{cache="users",result="hit"} 10
backstop_cache_requests_total{cache="users",result="miss"} 3
backstop_cache_requests_total{cache="users",result="stale"} 1
# HELP backstop_cache_refreshes_total Origin loads of a coalescing cache.
# TYPE backstop_cache_refreshes_total counter
backstop_cache_refreshes_total{cache="users"} 4
`), "backstop_cache_requests_total", "backstop_cache_refreshes_total")
	require.NoError(t, err)
}

func TestObserver_FleetSeriesOfABreakerAndABudgetOfOneNameStayApart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	// A fleet breaker and a fleet budget, both named for their dependency, lose Redis;
	// the budget comes back first.
	for _, e := range []event.Event{
		{Kind: event.Fleet, Source: "payments", Reason: "breaker", From: event.FleetShared, To: event.FleetLocal},
		{Kind: event.Fleet, Source: "payments", Reason: "budget", From: event.FleetShared, To: event.FleetLocal},
		{Kind: event.Fleet, Source: "payments", Reason: "budget", From: event.FleetLocal, To: event.FleetShared},
	} {
		obs.Observe(e)
	}
	want := `
# HELP backstop_fleet_transitions_total Fleet policies moving between deciding on shared state (shared) and on their own when the store is out of reach (local).
# TYPE backstop_fleet_transitions_total counter
backstop_fleet_transitions_total{kind="breaker",policy="payments",to="local"} 1
backstop_fleet_transitions_total{kind="budget",policy="payments",to="local"} 1
backstop_fleet_transitions_total{kind="budget",policy="payments",to="shared"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "backstop_fleet_transitions_total"))
}

// TestObserver_HalfOpenIsState1: a transition to "half_open", as breakers name the
// state, reads 1 and is counted under the series created at 0.
func TestObserver_HalfOpenIsState1(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	obs.Observe(event.Event{Kind: event.BreakerState, Source: "db", From: "closed", To: "open", Time: time.Unix(1, 0)})
	obs.Observe(event.Event{Kind: event.BreakerState, Source: "db", From: "open", To: "half_open", Time: time.Unix(2, 0)})
	require.Equal(t, 1.0, sample(t, reg, "backstop_breaker_state", map[string]string{"breaker": "db"}))
	require.Equal(t, 1.0, sample(t, reg, "backstop_breaker_transitions_total", map[string]string{"breaker": "db", "from": "open", "to": "half_open"}))
}
