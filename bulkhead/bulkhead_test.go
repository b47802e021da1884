package bulkhead_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	policytest.Run(t, func() policy.Policy { return policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 4})) })
	policytest.Run(t, func() policy.Policy {
		return policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1, MaxQueue: 100, MaxWait: time.Second}))
	})
}

func TestNew_RefusesBadOptionsNamingTheField(t *testing.T) {
	for _, tt := range []struct {
		name  string
		o     bulkhead.Options
		field string
	}{
		{"", bulkhead.Options{}, "name is empty"},
		{"db", bulkhead.Options{MaxConcurrent: -1}, "MaxConcurrent is -1"},
		{"db", bulkhead.Options{MaxQueue: -2}, "MaxQueue is -2"},
		{"db", bulkhead.Options{MaxWait: -time.Second}, "MaxWait is -1s"},
	} {
		tt.o.Name = tt.name
		_, err := bulkhead.New(tt.o)
		require.ErrorIs(t, err, bulkhead.ErrInvalidOptions, "New(%q, %+v)", tt.name, tt.o)
		require.ErrorContains(t, err, tt.field, "New(%q, %+v)", tt.name, tt.o)
	}
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db"}))
	require.Equal(t, bulkhead.DefaultMaxConcurrent, b.Limit(), "MaxConcurrent 0 means the default")
}

// hold starts n calls through p that each take a slot and hold it until release is
// closed; it returns once all n are inside fn.
func hold(t *testing.T, p *policy.Pipeline, n int, release <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	var wg, in sync.WaitGroup
	for range n {
		wg.Add(1)
		in.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Do(context.Background(), func(context.Context) error { in.Done(); <-release; return nil })
		}()
	}
	in.Wait()
	return &wg
}

func nop(context.Context) error { return nil }

func TestBulkhead_RefusesAtOnceWhenFullAndNoneMayWait(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 2}))
	var events []event.Event
	p := policy.Must(policy.Wrap(b, policy.Name("orders"), policy.Observe(event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.Rejected {
			events = append(events, e)
		}
	}))))
	release := make(chan struct{})
	wg := hold(t, p, 2, release)
	require.Equal(t, 2, b.InFlight())

	ran := false
	err := p.Do(context.Background(), func(context.Context) error { ran = true; return nil })
	require.False(t, ran, "a third call with two slots, both taken, must not run")
	require.ErrorIs(t, err, bulkhead.ErrFull)
	require.ErrorIs(t, err, policy.ErrRejected)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "no deadline was near")
	var rej *policy.RejectError
	require.ErrorAs(t, err, &rej, "a bulkhead's refusal is a *policy.RejectError")
	require.Equal(t, bulkhead.Kind, rej.Policy)
	require.Equal(t, "db", rej.Name)
	require.Equal(t, bulkhead.ReasonLimit, rej.Reason)
	require.Zero(t, rej.RetryAfter, "no call has ended yet: no estimate")
	require.Equal(t, "bulkhead db: rejected (limit)", err.Error())
	require.Equal(t, uint64(1), b.Refused())
	require.Len(t, events, 1)
	require.Equal(t, "orders", events[0].Pipeline)
	require.Equal(t, bulkhead.Kind, events[0].Stage)
	require.Equal(t, "db", events[0].Source)
	require.Equal(t, bulkhead.ReasonLimit, events[0].Reason)
	require.Zero(t, events[0].Delay, "the event's Delay is the refusal's RetryAfter")
	require.Same(t, rej, events[0].Err, "the event carries the refusal returned")

	close(release)
	wg.Wait()
	require.Equal(t, 0, b.InFlight(), "every slot given back")
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
}

func TestBulkhead_QueuedCallRunsWhenASlotFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1, MaxQueue: 1}))
		p := policy.Must(policy.Wrap(b))
		release := make(chan struct{})
		wg := hold(t, p, 1, release)

		queued := make(chan error, 1)
		go func() { queued <- p.Do(context.Background(), func(context.Context) error { return nil }) }()
		synctest.Wait()
		require.Equal(t, 1, b.Waiting(), "the second call waits for the slot")

		err := p.Do(context.Background(), func(context.Context) error { return nil })
		require.ErrorIs(t, err, bulkhead.ErrFull)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, bulkhead.ReasonQueue, rej.Reason, "a third call finds the slot taken and the queue full")

		close(release)
		wg.Wait()
		require.NoError(t, <-queued, "the queued call got the slot once it freed")
		require.Equal(t, 0, b.Waiting())
	})
}

func TestBulkhead_WaitsNoLongerThanMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1, MaxQueue: 4, MaxWait: 30 * time.Millisecond}))
		var got event.Event
		p := policy.Must(policy.Wrap(b, policy.Observe(event.ObserverFunc(func(e event.Event) {
			if e.Kind == event.Rejected {
				got = e
			}
		}))))
		release := make(chan struct{})
		wg := hold(t, p, 1, release)
		start := time.Now()
		err := p.Do(context.Background(), func(context.Context) error { return nil })
		require.Equal(t, 30*time.Millisecond, time.Since(start), "the call waited MaxWait, no more")
		require.ErrorIs(t, err, bulkhead.ErrFull)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, bulkhead.ReasonWait, rej.Reason)
		require.Equal(t, bulkhead.ReasonWait, got.Reason)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "MaxWait is the bulkhead's limit, not the call's deadline")
		require.Equal(t, 30*time.Millisecond, got.Elapsed, "the event says how long the call waited")
		close(release)
		wg.Wait()
	})
}

func TestBulkhead_NeverWaitsPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1, MaxQueue: 4, MaxWait: time.Second}))
		p := policy.Must(policy.Wrap(b))
		release := make(chan struct{})
		wg := hold(t, p, 1, release)

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := p.Do(ctx, func(context.Context) error { return nil })
		require.Equal(t, 20*time.Millisecond, time.Since(start), "the call waited until its deadline, not MaxWait (1s)")
		require.ErrorIs(t, err, bulkhead.ErrFull)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, policy.ErrRejected)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, bulkhead.ReasonDeadline, rej.Reason)

		// A deadline already past: refused at once.
		past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel2()
		start = time.Now()
		err = p.Do(past, func(context.Context) error { return nil })
		require.Zero(t, time.Since(start))
		require.Error(t, err)
		close(release)
		wg.Wait()
	})
}

func TestBulkhead_CancelledWaitIsTheCallersError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1, MaxQueue: 1}))
		p := policy.Must(policy.Wrap(b))
		release := make(chan struct{})
		wg := hold(t, p, 1, release)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Do(ctx, func(context.Context) error { return nil }) }()
		synctest.Wait()
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, policy.ErrRejected, "the caller gave up: that is no refusal")
		require.Equal(t, 0, b.Waiting(), "the cancelled call left the queue")
		close(release)
		wg.Wait()
	})
}

func TestBulkhead_RetryAfterFromTheMeanHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 2}))
		p := policy.Must(policy.Wrap(b))
		for range 3 { // every call holds its slot 100ms: the mean is 100ms
			require.NoError(t, p.Do(context.Background(), func(context.Context) error { time.Sleep(100 * time.Millisecond); return nil }))
		}
		require.Equal(t, 100*time.Millisecond, b.MeanHold())
		release := make(chan struct{})
		wg := hold(t, p, 2, release)
		err := p.Do(context.Background(), func(context.Context) error { return nil })
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		// Two slots, each freeing every 100ms on average: one frees every 50ms.
		require.Equal(t, 50*time.Millisecond, rej.RetryAfter)
		require.Equal(t, "bulkhead db: rejected (limit); retry after 50ms", err.Error())
		close(release)
		wg.Wait()
	})
}

// onlyRejected is an observer that reads event.Rejected and nothing else.
type onlyRejected struct{ got []event.Event }

func (o *onlyRejected) Observe(e event.Event) { o.got = append(o.got, e) }

func (o *onlyRejected) Needs(k event.Kind) event.Needs {
	if k == event.Rejected {
		return event.NeedsEvent
	}
	return event.NeedsNothing
}

func TestBulkhead_ReportsRefusalsToAnObserverThatNeedsOnlyThem(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1}))
	obs := &onlyRejected{}
	p := policy.Must(policy.Wrap(b, policy.Observe(obs)))
	release := make(chan struct{})
	wg := hold(t, p, 1, release)
	require.ErrorIs(t, p.Do(context.Background(), nop), bulkhead.ErrFull)
	close(release)
	wg.Wait()
	require.Len(t, obs.got, 1, "the observer asked for event.Rejected only, and got the one refusal")
	require.Equal(t, event.Rejected, obs.got[0].Kind)
	require.Equal(t, bulkhead.Kind, obs.got[0].Stage)
}

func TestBulkhead_PublishesItsGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 3, MaxQueue: 1}))
		var pub policy.Publisher = b
		require.Equal(t, "db", pub.Name())
		p := policy.Must(policy.Wrap(b))
		release := make(chan struct{})
		wg := hold(t, p, 3, release)
		queued := make(chan error, 1)
		go func() { queued <- p.Do(context.Background(), nop) }()
		synctest.Wait()
		got := map[string]float64{}
		for _, g := range pub.Gauges() {
			require.NotEmpty(t, g.Help, "gauge %q has no help", g.Name)
			got[g.Name] = g.Value()
		}
		// Three calls hold the three slots; a fourth waits for one.
		require.Equal(t, map[string]float64{"inflight": 3, "waiting": 1, "limit": 3}, got)
		require.Equal(t, 3, b.InFlight())
		require.Equal(t, 1, b.Waiting())
		close(release)
		wg.Wait()
		require.NoError(t, <-queued)
	})
}

func TestBulkhead_InsideTheRetryItsRefusalIsNotRetried(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1}))
	inner := policy.Must(policy.Wrap(b))
	release := make(chan struct{})
	wg := hold(t, inner, 1, release)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 5})), b))
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error { calls++; return fault.Retryable(errors.New("x")) })
	require.ErrorIs(t, err, bulkhead.ErrFull)
	require.Zero(t, calls, "the refusal ended the call: no attempt ran, none was retried")
	close(release)
	wg.Wait()
}

func TestBulkhead_APanickingCallGivesItsSlotBack(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1}))
	p := policy.Must(policy.Wrap(b))
	require.Panics(t, func() { _ = p.Do(context.Background(), func(context.Context) error { panic("boom") }) })
	require.Equal(t, 0, b.InFlight())
	require.NoError(t, p.Do(context.Background(), func(context.Context) error { return nil }))
}

func TestBulkhead_SharedByPipelines(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1}))
	a, c := policy.Must(policy.Wrap(b, policy.Name("a"))), policy.Must(policy.Wrap(b, policy.Name("c")))
	release := make(chan struct{})
	wg := hold(t, a, 1, release)
	require.ErrorIs(t, c.Do(context.Background(), func(context.Context) error { return nil }), bulkhead.ErrFull,
		"two pipelines with one bulkhead share its one slot")
	close(release)
	wg.Wait()
}

func TestBulkhead_SuccessPathAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := policy.Must(policy.Wrap(policy.Must(bulkhead.New(bulkhead.Options{Name: "db"}))))
	ctx := context.Background()
	if got := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, nop) }); got != 0 {
		t.Errorf("Wrap(bulkhead).Do allocates %v per call; want 0", got)
	}
}

func TestBulkhead_Explain(t *testing.T) {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 8, MaxQueue: 16, MaxWait: 50 * time.Millisecond}))
	st := b.ExplainStage()
	require.Equal(t, `bulkhead "db": at most 8 at once (calls outside the retry, attempts inside it); 16 more wait for a slot, each up to 50ms, never past its deadline`, st.Summary)
	require.Equal(t, `bulkhead "db" refuses a call that finds its 8 slots taken and 16 waiting, or has waited 50ms or until its deadline (bulkhead.ErrFull), with a Retry-After from the mean time a call holds its slot`, st.Refusal)
	require.Equal(t, 50*time.Millisecond, st.Wait)
	st = policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 8})).ExplainStage()
	require.Equal(t, `bulkhead "db": at most 8 at once (calls outside the retry, attempts inside it); none waits for a slot`, st.Summary)
	require.Equal(t, `bulkhead "db" refuses a call that finds its 8 slots taken (bulkhead.ErrFull), with a Retry-After from the mean time a call holds its slot`, st.Refusal)
	require.Zero(t, st.Wait)
	require.False(t, st.WaitUnbounded)
	require.True(t, policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxQueue: 1})).ExplainStage().WaitUnbounded, "a queue with no MaxWait waits as long as the deadline allows")
}

func BenchmarkBulkhead(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: 1 << 20}))))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.Do(ctx, nop)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = p.Do(ctx, nop)
			}
		})
	})
}

func TestBulkhead_NeverMoreInFlightThanItsLimit(t *testing.T) {
	const limit, callers, calls = 4, 32, 50
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "db", MaxConcurrent: limit, MaxQueue: callers}))
	p := policy.Must(policy.Wrap(b))
	var now, most atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range calls {
				err := p.Do(context.Background(), func(context.Context) error {
					n := now.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					runtime.Gosched()
					now.Add(-1)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call with room to wait for every caller failed: %v", err)
	}
	if m := most.Load(); m > limit {
		t.Errorf("%d calls ran at once through a bulkhead of %d", m, limit)
	}
	require.Equal(t, 0, b.InFlight())
	require.Equal(t, 0, b.Waiting())
}
