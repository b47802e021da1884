package metrics_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/metrics"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// histogram is what a gathered histogram holds.
type histogram struct {
	count   uint64
	sum     float64
	buckets [][2]float64 // upper bound, cumulative count
}

// histogramOf returns the first histogram of the family name in g.
func histogramOf(t *testing.T, g prometheus.Gatherer, name string) histogram {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		out := histogram{count: h.GetSampleCount(), sum: h.GetSampleSum()}
		for _, b := range h.GetBucket() {
			out.buckets = append(out.buckets, [2]float64{b.GetUpperBound(), float64(b.GetCumulativeCount())})
		}
		return out
	}
	t.Fatalf("Gather() has no %s", name)
	return histogram{}
}

// countersOf returns the counters of the family name in g by the value of label.
func countersOf(t *testing.T, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestCallDuration_SameBucketsAsClientGolang is a differential test: durations on
// and around every bound land in the same buckets, with the same count and sum, as in
// client_golang's histogram with the same bounds.
func TestCallDuration_SameBucketsAsClientGolang(t *testing.T) {
	bounds := []float64{-1, 0, 1e-9, 0.0001, 0.005, 0.1, 0.3, 1, 2.5, 10, 1e12}
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg, metrics.Options{Buckets: bounds})
	require.NoError(t, err)
	po := obs.ForPipeline("p")
	oracleReg := prometheus.NewRegistry()
	oracle := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "oracle", Buckets: bounds})
	oracleReg.MustRegister(oracle)
	var ds []time.Duration
	for _, b := range bounds {
		if math.Abs(b) > 1e9 {
			continue
		}
		d := time.Duration(b * 1e9)
		ds = append(ds, d-1, d, d+1)
	}
	ds = append(ds, time.Hour, math.MaxInt64/2)
	for _, d := range ds {
		po.Observe(event.Event{Kind: event.CallEnd, Pipeline: "p", Elapsed: max(d, 0)})
		oracle.Observe(max(d, 0).Seconds())
	}
	got, want := histogramOf(t, reg, "backstop_call_duration_seconds"), histogramOf(t, oracleReg, "oracle")
	require.Equal(t, want.count, got.count, "count")
	require.InEpsilon(t, want.sum, got.sum, 1e-12, "sum")
	require.Equal(t, want.buckets, got.buckets, "bounds and cumulative counts")
}

func TestNew_RefusesBucketsThatDoNotIncrease(t *testing.T) {
	for _, b := range [][]float64{{1, 1}, {2, 1}, {1, math.NaN()}} {
		_, err := metrics.New(prometheus.NewRegistry(), metrics.Options{Buckets: b})
		require.ErrorIs(t, err, metrics.ErrInvalidOptions, "New(Buckets: %v)", b)
	}
	_, err := metrics.New(prometheus.NewRegistry(), metrics.Options{Buckets: []float64{1, math.Inf(+1)}})
	require.NoError(t, err, "New(Buckets: [1, +Inf]): +Inf is implicit and allowed")
}

// TestCalls_CountedExactlyUnderConcurrency runs calls on many goroutines, which land on
// different stripes, and checks that a scrape sums them all.
func TestCalls_CountedExactlyUnderConcurrency(t *testing.T) {
	reg := prometheus.NewPedanticRegistry() // also checks what is collected against what is described
	obs := policy.Must(metrics.New(reg, metrics.Options{}))
	p := policy.Must(policy.Wrap(policy.Name("db"), policy.Observe(obs)))
	const goroutines, calls = 8, 500
	errFail := errors.New("fail")
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				var err error
				if (g+i)%4 == 0 {
					err = errFail
				}
				_ = p.Do(context.Background(), func(context.Context) error { return err })
			}
		}()
	}
	wg.Wait()
	byOutcome := countersOf(t, reg, "backstop_calls_total", "outcome")
	require.Equal(t, map[string]float64{"success": 3000, "failure": 1000, "rejected": 0, "canceled": 0, "deadline": 0}, byOutcome,
		"8 goroutines × 500 calls, one in 4 failing")
	require.Equal(t, uint64(goroutines*calls), histogramOf(t, reg, "backstop_call_duration_seconds").count, "every call timed")
}

func TestObservedCall_DoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	obs := policy.Must(metrics.New(prometheus.NewRegistry(), metrics.Options{}))
	p := policy.Must(policy.Wrap(policy.Name("db"), policy.Observe(obs)))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { _ = p.Do(ctx, fn) }); n != 0 {
		t.Errorf("an observed Do allocates %v times; want 0", n)
	}
	rt := policy.Must(retry.New(retry.Options{}))
	withRetry := policy.Must(policy.Wrap(rt, policy.Name("db"), policy.Observe(obs)))
	if n := testing.AllocsPerRun(100, func() { _ = withRetry.Do(ctx, fn) }); n != 0 {
		t.Errorf("an observed Do through a retry (attempts counted) allocates %v times; want 0", n)
	}
}

// TestCallsAndAttempts_SameWithOrWithoutEvents guards the counting of call and
// attempt ends without an event.Event (CallEnded, AttemptEnded): alone, metrics is
// handed them so; beside another observer, it gets the events. The counts agree.
func TestCallsAndAttempts_SameWithOrWithoutEvents(t *testing.T) {
	count := func(alone bool) (calls, attempts map[string]float64) {
		reg := prometheus.NewPedanticRegistry()
		var obs event.Observer = policy.Must(metrics.New(reg, metrics.Options{}))
		if !alone {
			obs = event.Observers(obs, event.ObserverFunc(func(event.Event) {}))
		}
		rt := policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Nanosecond, Cap: time.Nanosecond}))
		p := policy.Must(policy.Wrap(rt, policy.Name("db"), policy.Observe(obs)))
		errFail := fault.Retryable(errors.New("fail"))
		for i := range 10 {
			failures := i % 3 // 0, 1 or 2 failed attempts before a success
			_ = p.Do(context.Background(), func(context.Context) error {
				if failures > 0 {
					failures--
					return errFail
				}
				return nil
			})
		}
		_ = p.Do(context.Background(), func(context.Context) error { return errors.New("permanent") })
		return countersOf(t, reg, "backstop_calls_total", "outcome"), countersOf(t, reg, "backstop_attempts_total", "outcome")
	}
	calls, attempts := count(true)
	require.Equal(t, float64(10), calls["success"], "calls: 10 succeed")
	require.Equal(t, float64(1), calls["failure"], "calls: 1 fails")
	require.Equal(t, float64(10), attempts["success"], "attempts: one success a call")
	require.Equal(t, float64(3*1+3*2+1), attempts["failure"], "attempts: 3 calls fail once, 3 twice, 1 once for good")
	evCalls, evAttempts := count(false)
	require.Equal(t, evCalls, calls, "calls counted from events")
	require.Equal(t, evAttempts, attempts, "attempts counted from events")
}
