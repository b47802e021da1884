package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
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
