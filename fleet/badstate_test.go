package fleet

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// fleetErrs is an Observer that keeps the Err of every EventFleet that fell back.
type fleetErrs struct {
	mu   sync.Mutex
	errs []error
	tos  []string
}

func (f *fleetErrs) Observe(e event.Event) {
	if e.Kind != event.Fleet {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tos = append(f.tos, e.To)
	if e.To == event.FleetLocal {
		f.errs = append(f.errs, e.Err)
	}
}

func (f *fleetErrs) seen() ([]string, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.tos...), append([]error(nil), f.errs...)
}

// observedStore is srv.store with o as its Observer.
func observedStore(t *testing.T, srv *redisServer, id string, o event.Observer) *Store {
	st := policy.Must(New(srv.client(t), Options{ID: id, SyncInterval: time.Hour, Observer: o}))
	st.manual = true
	return st
}

func TestBreaker_AJunkProbeLeaseIsTreatedAsAbsent(t *testing.T) {
	const probeKey = "backstop:{breaker:db}:probe"
	o := breaker.Options{ConsecutiveFailures: 1, OpenTimeout: 200 * time.Millisecond, OpenJitter: -1}
	for _, tt := range []struct {
		name  string
		write func(srv *redisServer, gen uint64) error // the lease someone left
		junk  bool
	}{
		{"junk with no expiry", func(srv *redisServer, _ uint64) error {
			return srv.admin(t).Set(bg, probeKey, "junk", 0).Err()
		}, true},
		{"a lease of this episode with no expiry", func(srv *redisServer, gen uint64) error {
			return srv.admin(t).Set(bg, probeKey, fmt.Sprintf("%d c", gen), 0).Err()
		}, true},
		{"a lease of this episode that lasts a day", func(srv *redisServer, gen uint64) error {
			return srv.admin(t).Set(bg, probeKey, fmt.Sprintf("%d c", gen), 24*time.Hour).Err()
		}, true},
		{"a lease of an older episode", func(srv *redisServer, gen uint64) error {
			return srv.admin(t).Set(bg, probeKey, fmt.Sprintf("%d c", gen-1), time.Minute).Err()
		}, true},
		{"a list", func(srv *redisServer, _ uint64) error {
			return srv.admin(t).RPush(bg, probeKey, "c").Err()
		}, true},
		{"a lease another process took", func(srv *redisServer, gen uint64) error {
			return srv.admin(t).Set(bg, probeKey, fmt.Sprintf("%d c", gen), 200*time.Millisecond).Err()
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			var ev fleetErrs
			a := newReplica(t, observedStore(t, srv, "a", &ev), o)
			b := newReplica(t, srv.store(t, "b"), o)
			require.ErrorIs(t, b.p.Do(bg, fail), errDown) // b trips the fleet's breaker
			b.b.sync()
			a.b.sync()
			gen := a.b.view.Load().gen
			sleepPast(a.b, b.b) // half-open
			require.NoError(t, tt.write(srv, gen))

			err := a.p.Do(bg, ok)
			tos, errs := ev.seen()
			if !tt.junk {
				var rej *policy.RejectError
				require.ErrorAs(t, err, &rej, "another process holds the lease")
				require.Equal(t, breaker.ReasonHalfOpen, rej.Reason)
				require.Empty(t, tos, "a lease a breaker took is no bad state")
				return
			}
			require.NoError(t, err, "a probes: the junk lease counted as absent")
			require.Equal(t, []string{event.FleetLocal}, tos, "and an event says so")
			require.ErrorIs(t, errs[0], ErrBadState)
			require.ErrorContains(t, errs[0], probeKey)
			require.False(t, a.b.Shared(), "until its next sync")

			a.b.sync()
			require.True(t, a.b.Shared(), "the repaired state is shared again")
			tos, _ = ev.seen()
			require.Equal(t, []string{event.FleetLocal, event.FleetShared}, tos)
			b.b.sync()
			require.NoError(t, b.p.Do(bg, ok), "a's probe closed the fleet's breaker")
		})
	}
}

func TestBreaker_AnAbsurdOpenTimeIsCutToTheLongestOpen(t *testing.T) {
	srv := startRedis(t)
	var ev fleetErrs
	o := breaker.Options{OpenTimeout: 100 * time.Millisecond, MaxOpenTimeout: 200 * time.Millisecond, OpenJitter: 0.5} // open at most 300 ms
	a := newReplica(t, observedStore(t, srv, "a", &ev), o)
	require.NoError(t, srv.admin(t).HSet(bg, "backstop:{breaker:db}", "s", 2, "g", 7, "u", "1e300").Err())

	before := time.Now()
	a.b.sync()
	v := a.b.view.Load()
	require.True(t, v.open)
	require.WithinRange(t, v.until, before, time.Now().Add(300*time.Millisecond), "open at most the breaker's longest open time")
	var rej *policy.RejectError
	require.ErrorAs(t, a.p.Do(bg, ok), &rej)
	require.Equal(t, breaker.ReasonOpen, rej.Reason)
	require.LessOrEqual(t, rej.RetryAfter, 300*time.Millisecond, "refused for at most the longest open time")
	_, errs := ev.seen()
	require.Len(t, errs, 1, "an event says the state was bad")
	require.ErrorIs(t, errs[0], ErrBadState)
	require.ErrorContains(t, errs[0], "longest open time (300ms)")
	u, err := srv.admin(t).HGet(bg, "backstop:{breaker:db}", "u").Float64()
	require.NoError(t, err)
	require.Less(t, u, 1e15, "Redis holds the cut time")

	a.b.sync()
	require.True(t, a.b.Shared())
	sleepPast(a.b)
	require.NoError(t, a.p.Do(bg, ok), "the breaker half-opens after at most 300 ms, and its probe goes through")
}

func TestBreaker_StateThatIsNoBreakersIsTreatedAsAbsent(t *testing.T) {
	for _, tt := range []struct {
		name  string
		write func(srv *redisServer) error
	}{
		{"a string", func(srv *redisServer) error { return srv.admin(t).Set(bg, "backstop:{breaker:db}", "junk", 0).Err() }},
		{"fields that are no numbers", func(srv *redisServer) error {
			return srv.admin(t).HSet(bg, "backstop:{breaker:db}", "s", "open", "g", "x", "u", "nan").Err()
		}},
		{"an open state with no generation", func(srv *redisServer) error {
			return srv.admin(t).HSet(bg, "backstop:{breaker:db}", "s", 2, "u", "inf").Err()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			var ev fleetErrs
			a := newReplica(t, observedStore(t, srv, "a", &ev), breaker.Options{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
			require.NoError(t, tt.write(srv))
			a.b.sync()
			_, errs := ev.seen()
			require.Len(t, errs, 1)
			require.ErrorIs(t, errs[0], ErrBadState)
			require.ErrorContains(t, errs[0], "reset to closed")
			require.NoError(t, a.p.Do(bg, ok), "closed")
			a.b.sync()
			require.True(t, a.b.Shared(), "the state was repaired, not left to fail every sync")

			// The repaired state works: a trip is shared again.
			require.ErrorIs(t, a.p.Do(bg, fail), errDown)
			a.b.sync()
			require.True(t, a.b.view.Load().open)
			require.True(t, errors.Is(a.p.Do(bg, ok), breaker.ErrOpen))
		})
	}
}
