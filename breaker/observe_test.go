package breaker_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// transitions records breaker events as "pipeline: from→to".
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (r *transitions) Observe(e event.Event) {
	if e.Kind == event.BreakerState {
		r.mu.Lock()
		r.got = append(r.got, e.Pipeline+": "+e.From+"→"+e.To)
		r.mu.Unlock()
	}
}

func (r *transitions) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	sort.Strings(got)
	return got
}

// TestBreaker_EveryTransitionReachesEveryObserverOnce: a breaker shared by two
// pipelines reports each change — a trip by one pipeline's call, an operator's
// ForceOpen and Reset — once to each pipeline's observer, and once to OnStateChange.
func TestBreaker_EveryTransitionReachesEveryObserverOnce(t *testing.T) {
	var callbacks []string
	b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1,
		OnStateChange: func(_ string, from, to breaker.State) { callbacks = append(callbacks, from.String()+"→"+to.String()) }}))
	var orders, payments transitions
	po := policy.Must(policy.Wrap(b)).With(policy.Name("orders"), policy.Observe(&orders))
	policy.Must(policy.Wrap(b)).With(policy.Name("payments"), policy.Observe(&payments))
	po = po.With(policy.Name("orders"), policy.Observe(&orders)) // re-bound: still one subscription

	_ = po.Do(context.Background(), fail)
	require.Equal(t, []string{"orders: closed→open"}, orders.take())
	require.Equal(t, []string{"payments: closed→open"}, payments.take(), "the other pipeline hears of a trip it did not cause")

	b.Reset()
	require.Equal(t, []string{"orders: open→closed"}, orders.take(), "an operator's Reset is observed")
	require.Equal(t, []string{"payments: open→closed"}, payments.take())
	b.ForceOpen()
	require.Equal(t, []string{"orders: closed→open"}, orders.take(), "an operator's ForceOpen is observed")
	require.Equal(t, []string{"payments: closed→open"}, payments.take())
	b.Reset()
	require.Equal(t, []string{"closed→open", "open→closed", "closed→open", "open→closed"}, callbacks)
}

// TestBreaker_OpenJitterSpreadsReprobes: 100 breakers opened by one outage at the
// same instant let their probes through spread over [750 ms, 825 ms), each at the
// very time OpenNow says. The refusal's RetryAfter says it, rounded up to the
// millisecond.
func TestBreaker_OpenJitterSpreadsReprobes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		start := time.Now()
		var untils []time.Duration
		var pipelines []*policy.Pipeline
		for range 100 {
			b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, Rand: rng}))
			p := policy.Must(policy.Wrap(b))
			_ = p.Do(context.Background(), fail)
			var rej *policy.RejectError
			require.ErrorAs(t, p.Do(context.Background(), ok), &rej)
			d, open := b.OpenNow()
			require.True(t, open)
			require.True(t, rej.RetryAfter >= d && rej.RetryAfter < d+time.Millisecond,
				"RetryAfter %v; want OpenNow's %v rounded up to the millisecond", rej.RetryAfter, d)
			untils = append(untils, time.Now().Add(d).Sub(start))
			pipelines = append(pipelines, p)
		}
		lo, hi := breaker.DefaultOpenTimeout, breaker.DefaultOpenTimeout+breaker.DefaultOpenTimeout/10
		seconds := map[time.Duration]int{} // re-probes per tenth of the jitter
		for _, u := range untils {
			require.True(t, u >= lo && u < hi, "re-probe at %v; want in [%v, %v)", u, lo, hi)
			seconds[(u-lo)/(breaker.DefaultOpenTimeout/100)]++
		}
		require.Len(t, seconds, 10, "re-probes fall in every tenth of the window: %v", seconds)
		for slot, n := range seconds {
			require.LessOrEqual(t, n, 25, "slot %d holds %d of 100 re-probes", slot, n)
		}

		// OpenNow is truthful: refused up to its time, the probe goes through at it.
		first := 0
		for i, u := range untils {
			if u < untils[first] {
				first = i
			}
		}
		time.Sleep(untils[first] - time.Nanosecond)
		require.ErrorIs(t, pipelines[first].Do(context.Background(), ok), breaker.ErrOpen, "1 ns before the probe's time")
		time.Sleep(time.Nanosecond)
		require.NoError(t, pipelines[first].Do(context.Background(), ok), "at the probe's time it goes through")
	})
}

func TestNew_OpenJitterBounds(t *testing.T) {
	_, err := breaker.New(breaker.Options{Name: "db", OpenJitter: 1.5})
	require.ErrorIs(t, err, breaker.ErrInvalidOptions)
	require.ErrorContains(t, err, "OpenJitter is 1.5")
}

// TestBreaker_WithChainSubscribesOnce: options applied one With at a time, and the
// same options given to Wrap, leave one subscription per observer, whether the
// observer is a pointer or an ObserverFunc; the transition is reported under the
// last name.
func TestBreaker_WithChainSubscribesOnce(t *testing.T) {
	var ptr transitions
	var fn []string
	f := event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.BreakerState {
			fn = append(fn, e.Pipeline+": "+e.From+"→"+e.To)
		}
	})
	for _, o := range []struct {
		name string
		obs  event.Observer
		take func() []string
	}{
		{"pointer", &ptr, ptr.take},
		{"func", f, func() []string { got := fn; fn = nil; return got }},
	} {
		t.Run(o.name, func(t *testing.T) {
			b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
			p := policy.Must(policy.Wrap(b)).With(policy.Observe(o.obs)).With(policy.Name("db"))
			_ = p.Do(context.Background(), fail)
			require.Equal(t, []string{"db: closed→open"}, o.take(), "With chain")

			b = policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1}))
			p = policy.Must(policy.Wrap(b, policy.Observe(o.obs), policy.Name("db")))
			_ = p.Do(context.Background(), fail)
			require.Equal(t, []string{"db: closed→open"}, o.take(), "options given to Wrap")
		})
	}
}

// TestBreaker_ForceOpenFromHalfOpenIsATransition: a breaker whose open time is up
// reads half-open before gobreaker moves it. Forcing it open then is a transition
// half-open → open, now: it is observed, OnStateChange hears it, the snapshot's last
// transition and opened-at move forward to it, and the snapshot's RetryAfter is the
// one the refusal carries. Forcing open a closed breaker is a transition too; forcing
// open an open one is not.
func TestBreaker_ForceOpenFromHalfOpenIsATransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var callbacks []string
		b := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 1, OpenTimeout: time.Minute, MaxOpenTimeout: time.Minute, OpenJitter: -1,
			OnStateChange: func(_ string, from, to breaker.State) { callbacks = append(callbacks, from.String()+"→"+to.String()) }}))
		var obs transitions
		p := policy.Must(policy.Wrap(b)).With(policy.Name("orders"), policy.Observe(&obs))
		start := time.Now()
		_ = p.Do(context.Background(), fail)
		require.Equal(t, []string{"orders: closed→open"}, obs.take())

		time.Sleep(90 * time.Second) // the open minute is up: half-open, not yet moved
		now := time.Now()
		require.Equal(t, breaker.StateHalfOpen, b.State())
		require.Equal(t, start, b.Snapshot(now).OpenedAt)

		b.ForceOpen()
		require.Equal(t, []string{"orders: half_open→open"}, obs.take(), "forcing a half-open breaker open is observed")
		s := b.Snapshot(now)
		require.Equal(t, breaker.StateOpen, s.State)
		require.True(t, s.Forced)
		require.Equal(t, now, s.OpenedAt, "opened at is the time it was forced open")
		require.Equal(t, breaker.Transition{From: breaker.StateHalfOpen, To: breaker.StateOpen, At: now}, s.Last,
			"the last transition is the forcing, not the trip before it")
		err := p.Do(context.Background(), ok)
		var rej *policy.RejectError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, breaker.ReasonForced, rej.Reason)
		require.Equal(t, rej.RetryAfter, s.RetryAfter, "the snapshot says the Retry-After the refusal carries")
		d, open := b.OpenNow()
		require.True(t, open)
		require.Equal(t, d, s.RetryAfter)

		b.ForceOpen() // already forced: nothing
		b.Reset()
		require.Equal(t, []string{"orders: open→closed"}, obs.take())
		time.Sleep(time.Second)
		b.ForceOpen()
		require.Equal(t, []string{"orders: closed→open"}, obs.take())
		require.Equal(t, time.Now(), b.Snapshot(time.Now()).OpenedAt)
		b.Reset()
		_ = p.Do(context.Background(), fail) // trips
		time.Sleep(time.Second)
		tripped := b.Snapshot(time.Now()).OpenedAt
		b.ForceOpen()                                                                        // open and refusing: no transition, opened at kept
		require.Equal(t, []string{"orders: closed→open", "orders: open→closed"}, obs.take()) // sorted
		require.Equal(t, tripped, b.Snapshot(time.Now()).OpenedAt)
		require.Equal(t, []string{"closed→open", "half_open→open", "open→closed", "closed→open", "open→closed", "closed→open"}, callbacks)
	})
}
