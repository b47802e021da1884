package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

// panics is an Observer that keeps the EventPanic it hears.
type panics struct {
	mu     sync.Mutex
	events []event.Event
}

func (p *panics) Observe(e event.Event) {
	if e.Kind == event.Panic {
		p.mu.Lock()
		p.events = append(p.events, e)
		p.mu.Unlock()
	}
}

func (p *panics) get() []event.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event.Event(nil), p.events...)
}

func explodingOrigin(context.Context, string) (string, error) { panic("origin exploded") }

// requirePanicError checks that err is the *policy.PanicError of explodingOrigin.
func requirePanicError(t *testing.T, err error, what string) {
	t.Helper()
	var pe *policy.PanicError
	require.ErrorAs(t, err, &pe, "%s: want a *policy.PanicError", what)
	require.Equal(t, "origin exploded", pe.Value, "%s: the panic value", what)
	require.Contains(t, string(pe.Stack), "explodingOrigin", "%s: the stack names the panicking origin", what)
}

// TestGet_PanickingOriginReachesEveryWaiter: an origin that panics ends neither the
// process nor the load's waiters' wait: each of the 10 callers of the load receives the
// panic as a *policy.PanicError, and the panic is reported once.
func TestGet_PanickingOriginReachesEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		obs := &panics{}
		brk := policy.Must(breaker.New(breaker.Options{Name: "origin"}))
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{Observer: obs, Pipeline: policy.Must(policy.Wrap(brk)).With(policy.Name("origin")),
			Load: func(ctx context.Context, k string) (string, error) { <-gate; return explodingOrigin(ctx, k) }}))
		defer c.Close()
		errs := make(chan error, 10)
		for range 10 {
			go func() { _, err := c.Get(context.Background(), "k"); errs <- err }()
		}
		synctest.Wait() // every caller waits for the one load
		close(gate)
		for i := range 10 {
			requirePanicError(t, <-errs, fmt.Sprint("Get of caller ", i))
		}
		ev := obs.get()
		require.Len(t, ev, 1, "EventPanic reported for one panicking load")
		require.Equal(t, coalesce.PanicSource, ev[0].Source)
		require.Equal(t, "origin", ev[0].Pipeline)
		requirePanicError(t, ev[0].Err, "EventPanic.Err")
		st := c.Stats()
		require.Equal(t, uint64(1), st.Panics, "Stats().Panics")
		require.Equal(t, uint64(1), st.LoadErrors, "Stats().LoadErrors")

		// The failure is remembered like any other (negative caching).
		_, err := c.Get(context.Background(), "k")
		requirePanicError(t, err, "Get within NegativeTTL")
		require.Equal(t, uint64(1), c.Stats().Panics, "no new load within NegativeTTL")
	})
}

// TestRefresh_PanicInBackgroundIsContained: a stale-while-refresh refresh whose origin
// panics does not end the process: the stale value is served, the panic is reported, and
// the last good value is served over the failure within StaleIfError.
func TestRefresh_PanicInBackgroundIsContained(t *testing.T) {
	clock := policytest.NewClock(t0)
	obs := &panics{}
	var calls atomic.Int64
	load := func(ctx context.Context, k string) (string, error) {
		if calls.Add(1) > 1 {
			return explodingOrigin(ctx, k)
		}
		return "good", nil
	}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: load, Observer: obs, TTL: 10 * time.Second, Jitter: -1,
		StaleWhileRefresh: 5 * time.Second, Clock: clock}))
	defer c.Close()
	v, err := c.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "good", v)

	clock.Advance(11 * time.Second) // within stale-while-refresh: one background refresh
	v, err = c.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "good", v, "served stale while refreshing")
	c.Close() // the refresh panicked, on its own goroutine
	ev := obs.get()
	require.Len(t, ev, 1, "EventPanic reported for the panicking refresh")
	requirePanicError(t, ev[0].Err, "EventPanic.Err of the refresh")

	v, err = c.Get(context.Background(), "k")
	require.NoError(t, err, "stale if error, the error being a panic")
	require.Equal(t, "good", v)
	c.Close()
	require.Equal(t, int64(2), calls.Load(), "origin calls: the failed refresh is remembered for NegativeTTL")
}

// TestGet_PanicInPipelineObserverIsContained: a panic in the pipeline's own observer,
// on the load's goroutine, reaches the caller as an error too.
func TestGet_PanicInPipelineObserverIsContained(t *testing.T) {
	boom := errors.New("observer exploded")
	p := policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "origin"})))).With(policy.Observe(event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.CallEnd {
			panic(boom)
		}
	})))
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Pipeline: p, Load: func(context.Context, string) (string, error) { return "v", nil }}))
	defer c.Close()
	_, err := c.Get(context.Background(), "k")
	var pe *policy.PanicError
	require.ErrorAs(t, err, &pe, "Get with a panicking observer")
	require.ErrorIs(t, err, boom, "the PanicError unwraps to the panic's error value")
}

// TestGet_GoexitInOriginEndsTheWait: an origin that calls runtime.Goexit (t.FailNow in a
// fake, say) leaves no caller waiting forever.
func TestGet_GoexitInOriginEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := policy.Must(coalesce.New(coalesce.Options[string, string]{
			Load: func(context.Context, string) (string, error) { runtime.Goexit(); return "", nil }}))
		defer c.Close()
		_, err := c.Get(context.Background(), "k")
		require.Error(t, err)
		require.True(t, strings.Contains(err.Error(), "Goexit"), "Get after Load called runtime.Goexit = %v; want an error naming Goexit", err)
	})
}
