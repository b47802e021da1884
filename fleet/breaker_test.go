package fleet

import (
	"context"
	"errors"
	"flag"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/policy"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // the dial failures the tests cause on purpose
	if fleettest.Installed() != nil {
		// An Example cannot skip: without redis-server the Examples are left out, and
		// each test that needs the server skips saying how to install it.
		flag.Parse()
		_ = flag.Set("test.skip", "^Example")
	}
	// After a failed dial, a go-redis pool probes its server once a second until it
	// answers or the pool is closed: it ends by itself within a second of Close.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

var errDown = errors.New("db down")

func fail(context.Context) error { return errDown }
func ok(context.Context) error   { return nil }

// fleetEvents is an Observer that hands each EventFleet's Source and To to f.
type fleetEvents func(source, to string)

func (f fleetEvents) Observe(e event.Event) {
	if e.Kind == event.Fleet {
		f(e.Source, e.To)
	}
}

// events collects what fleetEvents hears.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(source, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, source+"→"+to)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// replica is one process's breaker "db" and the pipeline through it.
type replica struct {
	b *Breaker
	p *policy.Pipeline
}

func newReplica(t *testing.T, s *Store, o breaker.Options) replica {
	t.Helper()
	o.Name = "db"
	b, err := NewBreaker(s, o)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return replica{b: b, p: policy.Must(policy.Wrap(b))}
}

func TestBreaker_OneTripsItAllRefuseOneProbesAllClose(t *testing.T) {
	srv := startRedis(t)
	o := breaker.Options{ConsecutiveFailures: 2, OpenTimeout: 300 * time.Millisecond, OpenJitter: -1}
	a := newReplica(t, srv.store(t, "a"), o)
	b := newReplica(t, srv.store(t, "b"), o)
	c := newReplica(t, srv.store(t, "c"), o)
	all := []replica{a, b, c}

	// a sees two failures and trips; its transition is published; b and c adopt it.
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	require.Equal(t, breaker.StateOpen, a.b.Local().State())
	a.b.sync()
	b.b.sync()
	c.b.sync()
	var until []time.Time
	for i, r := range all {
		var rej *policy.RejectError
		now := time.Now()
		require.ErrorAs(t, r.p.Do(bg, ok), &rej, "replica %d refuses", i)
		require.ErrorIs(t, rej, policy.ErrRejected)
		require.Equal(t, breaker.ReasonOpen, rej.Reason, "replica %d", i)
		until = append(until, now.Add(rej.RetryAfter)) // when its probe may go
		require.Equal(t, breaker.StateOpen, r.b.Local().State(), "replica %d's breaker shows open", i)
	}
	for i := range until[1:] {
		require.WithinDuration(t, until[0], until[i+1], 50*time.Millisecond, "every replica refuses until the same moment")
	}

	// The open time passes: the fleet is half-open and one replica probes (the first to
	// ask: here a); while its probe runs, the others refuse.
	sleepPast(a.b, b.b, c.b)
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- a.p.Do(bg, func(context.Context) error { close(started); <-release; return nil })
	}()
	<-started
	for i, r := range all[1:] {
		var rej *policy.RejectError
		require.ErrorAs(t, r.p.Do(bg, ok), &rej, "replica %d", i+1)
		require.Equal(t, breaker.ReasonHalfOpen, rej.Reason, "replica %d refuses: a probes", i+1)
		require.Equal(t, breaker.Kind, rej.Policy)
		require.ErrorIs(t, rej, breaker.ErrOpen)
		require.Equal(t, 300*time.Millisecond, rej.RetryAfter, "replica %d: come back once a's probe has had OpenTimeout", i+1)
	}
	close(release)
	require.NoError(t, <-done)
	probed := []int{0}

	// Its success closes the breaker everywhere.
	all[probed[0]].b.sync()
	for i, r := range all {
		r.b.sync()
		require.NoError(t, r.p.Do(bg, ok), "replica %d", i)
		require.Equal(t, breaker.StateClosed, r.b.Local().State(), "replica %d", i)
	}
}

// sleepPast waits until the open time every breaker adopted has passed: each computed
// it from the Redis server's time left, when its own sync returned.
func sleepPast(bs ...*Breaker) {
	var last time.Time
	for _, b := range bs {
		if u := b.view.Load().until; u.After(last) {
			last = u
		}
	}
	time.Sleep(time.Until(last) + time.Millisecond)
}

func TestBreaker_AFailedProbeReopensEverywhere(t *testing.T) {
	srv := startRedis(t)
	o := breaker.Options{ConsecutiveFailures: 1, OpenTimeout: 200 * time.Millisecond, OpenJitter: -1}
	a := newReplica(t, srv.store(t, "a"), o)
	b := newReplica(t, srv.store(t, "b"), o)
	require.ErrorIs(t, b.p.Do(bg, fail), errDown)
	b.b.sync()
	a.b.sync()
	first := a.b.view.Load()
	require.True(t, first.open)

	sleepPast(a.b, b.b)
	// a asks first, so a holds the lease; its probe fails and reopens the fleet's breaker.
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	var rej *policy.RejectError
	require.ErrorAs(t, b.p.Do(bg, ok), &rej)
	require.Equal(t, breaker.ReasonHalfOpen, rej.Reason)
	a.b.sync()
	b.b.sync()
	second := b.b.view.Load()
	require.True(t, second.open)
	require.Greater(t, second.gen, first.gen, "a new open episode")
	now := time.Now()
	require.ErrorAs(t, b.p.Do(bg, ok), &rej)
	require.Equal(t, breaker.ReasonOpen, rej.Reason, "open again, until a new time")
	require.True(t, now.Add(rej.RetryAfter).After(first.until))
}

func TestBreaker_RedisDownDecidesLocallyAndPublishesOnReturn(t *testing.T) {
	srv := startRedis(t)
	var ev events
	o := breaker.Options{ConsecutiveFailures: 2, OpenTimeout: time.Hour, OpenJitter: -1}
	a := newReplica(t, srv.store(t, "a", ev.add), o)
	b := newReplica(t, srv.store(t, "b"), o)
	require.True(t, a.b.Shared())

	srv.stop()
	a.b.sync()
	require.False(t, a.b.Shared(), "Redis gone: a decides alone")
	require.Equal(t, []string{"db→local"}, ev.list())
	// Calls go on; the local breaker counts, trips and refuses by itself.
	require.NoError(t, a.p.Do(bg, ok))
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	require.ErrorIs(t, a.p.Do(bg, ok), breaker.ErrOpen)
	a.b.sync() // cannot publish: kept for later
	require.True(t, a.b.pending.Load() || !a.b.Shared())

	srv.start()
	a.b.sync()
	require.True(t, a.b.Shared())
	require.Equal(t, []string{"db→local", "db→shared"}, ev.list())
	b.b.sync()
	require.ErrorIs(t, b.p.Do(bg, ok), breaker.ErrOpen, "a's trip while Redis was down reached the fleet on its return")
}

func TestBreaker_SlowRedisIsBoundedByTimeout(t *testing.T) {
	srv := startRedis(t)
	a := newReplica(t, srv.store(t, "a"), breaker.Options{})
	// Every client's commands wait 2 s; the store's 50 ms bound ends the sync.
	require.NoError(t, srv.admin(t).Do(bg, "CLIENT", "PAUSE", "2000", "ALL").Err())
	a.b.sync()
	require.False(t, a.b.Shared(), "a Redis slower than Timeout counts as out of reach")
	require.True(t, isTimeout(a.b.link.lastErr()), "the sync ended at the store's Timeout, not Redis's answer: %v", a.b.link.lastErr())
	require.NoError(t, a.p.Do(bg, ok), "calls go on")
}

// isTimeout reports whether err is a deadline's: the context's, or the connection's
// deadline that go-redis sets from it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestNewBreaker_RefusesBadInput(t *testing.T) {
	_, err := NewBreaker(nil, breaker.Options{Name: "db"})
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorContains(t, err, "Store is nil")
	srv := startRedis(t)
	_, err = NewBreaker(srv.store(t, "a"), breaker.Options{Name: ""})
	require.ErrorIs(t, err, breaker.ErrInvalidOptions)
}

func TestBreaker_TheBackgroundLoopSpreadsATrip(t *testing.T) {
	srv := startRedis(t)
	opened := make(chan time.Time, 1)
	o := breaker.Options{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1}
	a := newReplica(t, policy.Must(New(srv.client(t), Options{SyncInterval: 10 * time.Millisecond})), o)
	o.OnStateChange = func(_ string, _, to breaker.State) {
		if to == breaker.StateOpen {
			opened <- time.Now()
		}
	}
	b := newReplica(t, policy.Must(New(srv.client(t), Options{SyncInterval: 10 * time.Millisecond})), o)
	require.ErrorIs(t, a.p.Do(bg, fail), errDown) // a trips; its loop publishes at once
	select {
	case <-opened: // b's loop read it and b's breaker opened
	case <-time.After(10 * time.Second):
		t.Fatal("b never heard of a's trip")
	}
	var rej *policy.RejectError
	require.ErrorAs(t, b.p.Do(bg, ok), &rej)
	require.Greater(t, rej.RetryAfter, 59*time.Minute, "b refuses for a's hour")
	aUntil, _ := a.b.Local().OpenNow()
	require.Greater(t, aUntil, 59*time.Minute)
}

func TestBreaker_AProcessStillOpenByItselfLeavesTheProbeToAnother(t *testing.T) {
	srv := startRedis(t)
	a := newReplica(t, srv.store(t, "a"), breaker.Options{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1})
	b := newReplica(t, srv.store(t, "b"), breaker.Options{ConsecutiveFailures: 1, OpenTimeout: 200 * time.Millisecond, OpenJitter: -1})
	require.ErrorIs(t, b.p.Do(bg, fail), errDown)
	b.b.sync() // the fleet is open for 200 ms
	require.ErrorIs(t, a.p.Do(bg, fail), errDown)
	a.b.sync() // a's own trip, for an hour, changes nothing in the fleet
	sleepPast(a.b, b.b)

	var rej *policy.RejectError
	require.ErrorAs(t, a.p.Do(bg, ok), &rej)
	require.Equal(t, breaker.ReasonOpen, rej.Reason, "a refuses by itself")
	require.Greater(t, rej.RetryAfter, 59*time.Minute, "open for its own hour")
	require.NoError(t, b.p.Do(bg, ok), "b took the probe lease a did not ask for, and its probe went through")
	b.b.sync()
	a.b.sync()
	require.NoError(t, a.p.Do(bg, ok), "b's probe closed the breaker for a too")
}
