package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
)

func TestNew_RefusesBadOptions(t *testing.T) {
	ok := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer ok.Close()
	noTimeouts := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noTimeouts.Close()
	for _, c := range []struct {
		rdb  redis.UniversalClient
		o    Options
		want string
	}{
		{nil, Options{}, "client is nil"},
		{noTimeouts, Options{}, "ContextTimeoutEnabled is false"},
		{ok, Options{Timeout: -time.Second}, "Timeout is -1s"},
		{ok, Options{SyncInterval: -time.Second}, "SyncInterval is -1s"},
	} {
		_, err := New(c.rdb, c.o)
		require.ErrorIs(t, err, ErrInvalidOptions)
		require.ErrorContains(t, err, c.want)
	}
	s, err := New(ok, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, s.ID())
	require.Equal(t, DefaultTimeout, s.timeout)
	require.Equal(t, DefaultSyncInterval, s.interval)
	require.Equal(t, "backstop:{breaker:db}:probe", s.key("breaker", "db", "probe"))
}

// quiet drops go-redis's own log lines (dial failures the tests cause on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestEvents_SayThePolicysKind(t *testing.T) {
	srv := startRedis(t)
	var mu sync.Mutex
	var got []string
	st := policy.Must(New(srv.client(t), Options{ID: "a", SyncInterval: time.Hour, Observer: event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.Fleet {
			mu.Lock()
			got = append(got, e.Source+"/"+e.Stage+"/"+e.Reason+"→"+e.To)
			mu.Unlock()
		}
	})}))
	st.manual = true
	// The README's way: each policy named for the dependency it guards.
	br, err := NewBreaker(st, breaker.Options{Name: "payments"})
	require.NoError(t, err)
	defer br.Close()
	bu, err := NewRatio(st, budget.RatioOptions{Name: "payments"})
	require.NoError(t, err)
	defer bu.Close()
	q, err := NewQuota(st, QuotaOptions{Name: "payments", MaxLocalClients: 0})
	require.NoError(t, err)

	srv.stop()
	br.sync()
	bu.sync()
	q.Allow(bg, "alice", 10, 10)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"payments/breaker/breaker→local", "payments/budget/budget→local", "payments/shed/quota→local"}, got,
		"a breaker's, a budget's and a quota's events of one name stay apart by their kind; Stage is the stage each serves")
}
