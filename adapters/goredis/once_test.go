package goredis_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/policy"
)

// Once returns the same reply, of every kind, when sent again with a token: the
// command runs once. An error reply leaves the token unset.
func TestOnce_Replies(t *testing.T) {
	s := startRedis(t)
	c, _ := adapted(t, s.Addr(), policy.Must(policy.Wrap(retry3())))
	for _, tc := range []struct {
		args []any
		want any
	}{
		{[]any{"set", "k", "v"}, "OK"},
		{[]any{"lpush", "l", "a", "b"}, int64(2)},
		{[]any{"lrange", "l", 0, -1}, []any{"b", "a"}},
		{[]any{"hincrby", "h", "f", 5}, int64(5)},
	} {
		for i := range 2 {
			got, err := goredis.Once(bg, c, "once:"+tc.args[0].(string), time.Minute, tc.args...).Result()
			require.NoError(t, err, "Once %v, send %d", tc.args, i+1)
			require.Equal(t, tc.want, got, "Once %v, send %d", tc.args, i+1)
		}
	}
	require.Equal(t, []string{"b", "a"}, c.LRange(bg, "l", 0, -1).Val(), "LPUSH ran once")

	err := goredis.Once(bg, c, "once:get", time.Minute, "get", "missing").Err()
	require.ErrorIs(t, err, redis.Nil, "a nil reply")
	require.ErrorIs(t, goredis.Once(bg, c, "once:get", time.Minute, "get", "missing").Err(), redis.Nil, "a nil reply, kept")

	require.Error(t, goredis.Once(bg, c, "once:wrong", time.Minute, "incr", "l").Err(), "INCR of a list")
	require.Zero(t, c.Exists(bg, "once:wrong").Val(), "an error reply sets no token")

	for _, bad := range []struct {
		token string
		ttl   time.Duration
		args  []any
	}{{"", time.Minute, []any{"incr", "n"}}, {"t", 0, []any{"incr", "n"}}, {"t", time.Minute, nil}} {
		require.ErrorIs(t, goredis.Once(bg, c, bad.token, bad.ttl, bad.args...).Err(), goredis.ErrInvalidOptions,
			"Once(%q, %v, %v)", bad.token, bad.ttl, bad.args)
	}
}
