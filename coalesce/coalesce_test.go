package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errOrigin = errors.New("origin down")
)

// origin counts its calls; while gate is non-nil it blocks on it.
type origin struct {
	calls atomic.Int64
	fail  atomic.Bool
	gate  chan struct{}
}

func (o *origin) load(_ context.Context, key string) (string, error) {
	n := o.calls.Add(1)
	if o.gate != nil {
		<-o.gate
	}
	if o.fail.Load() {
		return "", errOrigin
	}
	return fmt.Sprintf("%s#%d", key, n), nil
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition never held")
		}
	}
}

// TestGet_AThousandMissesOneOriginCall: 1 000 concurrent misses of one key share one
// origin call.
func TestGet_AThousandMissesOneOriginCall(t *testing.T) {
	o := &origin{gate: make(chan struct{})}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Clock: policytest.NewClock(t0)}))
	defer c.Close()
	var wg sync.WaitGroup
	got := make([]string, 1000)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Get(context.Background(), "hot")
			require.NoError(t, err)
			got[i] = v
		}()
	}
	waitUntil(t, func() bool { return c.Stats().Misses == 1000 }) // every caller has missed
	close(o.gate)
	wg.Wait()
	require.Equal(t, int64(1), o.calls.Load(), "origin calls for 1 000 concurrent misses")
	for _, v := range got {
		require.Equal(t, "hot#1", v)
	}
	st := c.Stats()
	require.Equal(t, uint64(1), st.Refreshes)
	require.LessOrEqual(t, st.CoalescedWaits, uint64(999))
}

// TestGet_ExpiringHotKeyOneRefreshNoMiss: a hot key past its TTL is served stale at
// once while one background refresh runs; no caller waits for the origin.
func TestGet_ExpiringHotKeyOneRefreshNoMiss(t *testing.T) {
	clock := policytest.NewClock(t0)
	o := &origin{}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, TTL: 10 * time.Second, Jitter: -1,
		StaleWhileRefresh: 5 * time.Second, Clock: clock}))
	defer c.Close()
	v, err := c.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "k#1", v)

	clock.Advance(11 * time.Second) // past the TTL, within stale-while-refresh
	o.gate = make(chan struct{})
	for range 500 {
		v, err := c.Get(context.Background(), "k")
		require.NoError(t, err)
		require.Equal(t, "k#1", v, "served stale at once")
	}
	close(o.gate)
	c.Close()
	require.Equal(t, int64(2), o.calls.Load(), "one refresh for 500 stale reads")
	v, _ = c.Get(context.Background(), "k")
	require.Equal(t, "k#2", v, "the refreshed value")
	require.Equal(t, uint64(1), c.Stats().Misses, "only the very first read missed")
}

// TestTTLJitter_SpreadsExpiries: 1 000 keys written together expire spread over
// [0.9·TTL, 1.1·TTL] instead of at once.
func TestTTLJitter_SpreadsExpiries(t *testing.T) {
	clock := policytest.NewClock(t0)
	o := &origin{}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, TTL: 100 * time.Second, StaleWhileRefresh: -1,
		Clock: clock, Rand: seeded()}))
	defer c.Close()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		_, _ = c.Get(context.Background(), keys[i])
	}
	clock.Advance(89 * time.Second)
	perSecond := map[int]int{}
	for s := 90; s <= 111; s++ {
		clock.Advance(time.Second)
		before := o.calls.Load()
		for _, k := range keys {
			_, _ = c.Get(context.Background(), k)
		}
		if n := int(o.calls.Load() - before); n > 0 {
			perSecond[s] = n
		}
	}
	t.Logf("reloads per second of age: %v", perSecond)
	require.GreaterOrEqual(t, len(perSecond), 15, "expiries spread over most of the 20 s window")
	for s, n := range perSecond {
		require.LessOrEqual(t, n, 100, "second %d held %d of 1 000 expiries", s, n)
		require.True(t, s >= 90 && s <= 111, "an expiry at %d s, outside [90, 110] s", s)
	}
}

func TestGet_StaleIfErrorIsBounded(t *testing.T) {
	clock := policytest.NewClock(t0)
	o := &origin{}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, TTL: 10 * time.Second, Jitter: -1, StaleWhileRefresh: -1,
		StaleIfError: 30 * time.Second, NegativeTTL: -1, Clock: clock}))
	defer c.Close()
	_, _ = c.Get(context.Background(), "k")
	o.fail.Store(true)
	clock.Advance(15 * time.Second)
	v, err := c.Get(context.Background(), "k")
	require.NoError(t, err, "within stale-if-error the last good value is served")
	require.Equal(t, "k#1", v)
	clock.Advance(30 * time.Second) // 45 s: past TTL + StaleIfError
	_, err = c.Get(context.Background(), "k")
	require.ErrorIs(t, err, errOrigin, "past it, the error")
}

func TestGet_NegativeCachingBacksOff(t *testing.T) {
	clock := policytest.NewClock(t0)
	o := &origin{}
	o.fail.Store(true)
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, NegativeTTL: time.Second, MaxNegativeTTL: 4 * time.Second, Clock: clock}))
	defer c.Close()
	get := func() error { _, err := c.Get(context.Background(), "k"); return err }
	require.ErrorIs(t, get(), errOrigin)
	require.ErrorIs(t, get(), errOrigin)
	require.Equal(t, int64(1), o.calls.Load(), "the failure is remembered")
	var calls []int64
	for range 10 { // 10 s, a second at a time: asks after 1, 2, 4, 4 s
		clock.Advance(time.Second)
		_ = get()
		calls = append(calls, o.calls.Load())
	}
	require.Equal(t, []int64{2, 2, 3, 3, 3, 3, 4, 4, 4, 4}, calls, "1 s, then 2 s, then 4 s (the cap) between origin calls")
}

func TestGet_OpenBreakerServesStale(t *testing.T) {
	clock := policytest.NewClock(t0)
	o := &origin{}
	brk := policy.Must(breaker.New(breaker.Options{Name: "origin"}))
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Pipeline: policy.Must(policy.Wrap(brk)), TTL: 10 * time.Second,
		Jitter: -1, StaleWhileRefresh: -1, Clock: clock}))
	defer c.Close()
	_, _ = c.Get(context.Background(), "k")
	brk.ForceOpen()
	clock.Advance(20 * time.Second)
	v, err := c.Get(context.Background(), "k")
	require.NoError(t, err, "with the breaker open, the stale value")
	require.Equal(t, "k#1", v)
	require.Equal(t, int64(1), o.calls.Load(), "the origin was not called")

	_, err = c.Get(context.Background(), "other")
	require.ErrorIs(t, err, breaker.ErrOpen, "no stale value: the refusal")
}

// TestGet_CallerGivesUpTheLoadGoesOn: a caller whose context ends stops waiting; the
// shared load finishes for the others and is kept.
func TestGet_CallerGivesUpTheLoadGoesOn(t *testing.T) {
	o := &origin{gate: make(chan struct{})}
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: o.load, Clock: policytest.NewClock(t0)}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := c.Get(ctx, "k"); done <- err }()
	waitUntil(t, func() bool { return o.calls.Load() == 1 })
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	close(o.gate)
	c.Close()
	v, err := c.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, "k#1", v, "the load the caller left finished and was kept")
	require.Equal(t, int64(1), o.calls.Load())
}

// TestXFetch_RefreshesAHotKeyEarly: with a large β and a small draw, a fresh key is
// refreshed before it expires.
func TestXFetch_RefreshesAHotKeyEarly(t *testing.T) {
	clock := policytest.NewClock(t0)
	slow := func(_ context.Context, k string) (string, error) { clock.Advance(time.Second); return k, nil } // a load of 1 s
	c := policy.Must(coalesce.New(coalesce.Options[string, string]{Load: slow, TTL: 10 * time.Second, Jitter: -1, XFetchBeta: 1,
		Clock: clock, Rand: policytest.NewRand(0.5, 0.01)}))
	defer c.Close()
	_, _ = c.Get(context.Background(), "k") // loaded at 1 s, fresh until 11 s
	clock.Advance(5 * time.Second)          // 6 s: 5 s before expiry; −1 s·ln(0.01) = 4.6 s: not yet
	_, _ = c.Get(context.Background(), "k")
	c.Close()
	require.Equal(t, uint64(1), c.Stats().Refreshes)
	clock.Advance(2 * time.Second) // 8 s: 3 s before expiry < 4.6 s: refresh early
	_, _ = c.Get(context.Background(), "k")
	c.Close()
	require.Equal(t, uint64(2), c.Stats().Refreshes, "refreshed before its TTL")
}

func TestNew_RefusesBadOptions(t *testing.T) {
	_, err := coalesce.New(coalesce.Options[string, string]{})
	require.ErrorIs(t, err, coalesce.ErrInvalidOptions)
	require.ErrorContains(t, err, "Load is nil")
	_, err = coalesce.New(coalesce.Options[string, string]{Load: (&origin{}).load, Jitter: 2})
	require.ErrorContains(t, err, "Jitter is 2")
}

func TestMaxEntries_Bounded(t *testing.T) {
	c := policy.Must(coalesce.New(coalesce.Options[int, int]{Load: func(_ context.Context, k int) (int, error) { return k, nil }, MaxEntries: 100}))
	defer c.Close()
	for i := range 10_000 {
		_, _ = c.Get(context.Background(), i)
	}
	require.Equal(t, 100, c.Len())
}

// seeded is a deterministic random source safe for concurrent use.
func seeded() jitter.Rand { return &lcg{state: 1} }

type lcg struct {
	mu    sync.Mutex
	state uint64
}

func (l *lcg) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = l.state*6364136223846793005 + 1442695040888963407
	return float64(l.state>>11) / (1 << 53)
}
