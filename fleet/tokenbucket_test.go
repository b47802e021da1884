package fleet

import (
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/budget"
)

func newTokenBucket(t *testing.T, s *Store) *TokenBucket {
	t.Helper()
	b, err := NewTokenBucket(s, budget.TokenBucketOptions{Name: "db", MaxTokens: 10, TokenRatio: 0.5})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestTokenBucket_OneBucketForTheFleet(t *testing.T) {
	srv := startRedis(t)
	a, b, c := newTokenBucket(t, srv.store(t, "a")), newTokenBucket(t, srv.store(t, "b")), newTokenBucket(t, srv.store(t, "c"))
	for range 3 {
		a.OnFailure()
		b.OnFailure()
	}
	require.True(t, a.Withdraw(), "a alone has seen 3 failures: 7 of 10 tokens")
	a.sync()
	b.sync()
	c.sync()
	require.Equal(t, 7.0, a.Tokens(), "a synced before b had sent its failures")
	a.sync()
	require.Equal(t, 4.0, a.Tokens(), "10 − 3 − 3")
	require.Equal(t, 4.0, c.Tokens())
	for i, x := range []*TokenBucket{a, b, c} {
		require.False(t, x.Withdraw(), "process %d: the fleet's 6 failures spent half the bucket", i)
	}
	// Two processes with buckets of their own would each still retry.
	local := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.5}))
	for range 3 {
		local.OnFailure()
	}
	require.True(t, local.Withdraw())

	// Successes anywhere refill it for everyone: 4 + 4 × 0.5 = 6 > 5.
	for range 4 {
		c.OnSuccess()
	}
	c.sync()
	a.sync()
	require.Equal(t, 6.0, a.Tokens())
	require.True(t, a.Withdraw())
	require.Equal(t, uint64(2), a.Allowed())
	require.Equal(t, uint64(1), a.Refused())
}

func TestTokenBucket_RedisDownUsesItsOwnBucketAndLosesNothing(t *testing.T) {
	srv := startRedis(t)
	var ev events
	a := newTokenBucket(t, srv.store(t, "a", ev.add))
	srv.stop()
	for range 6 {
		a.OnFailure()
	}
	a.sync()
	require.False(t, a.Shared())
	require.Equal(t, []string{"db→local"}, ev.list())
	require.False(t, a.Withdraw(), "its own bucket has seen its 6 failures")
	require.Equal(t, 4.0, a.Tokens())

	srv.start()
	a.sync()
	require.True(t, a.Shared())
	v, err := srv.admin(t).Get(bg, "backstop:{tokens:db}").Int()
	require.NoError(t, err)
	require.Equal(t, 4000, v, "the failures made while Redis was down reached the fleet's bucket")
}

func TestNewTokenBucket_RefusesBadInput(t *testing.T) {
	_, err := NewTokenBucket(nil, budget.TokenBucketOptions{Name: "db", MaxTokens: 10, TokenRatio: 0.1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	srv := startRedis(t)
	_, err = NewTokenBucket(srv.store(t, "a"), budget.TokenBucketOptions{Name: "db", MaxTokens: 0, TokenRatio: 0.1})
	require.ErrorIs(t, err, budget.ErrInvalidOptions)
	require.ErrorContains(t, err, "MaxTokens")
	b, err := NewTokenBucket(srv.store(t, "a"), budget.TokenBucketOptions{Name: "db", MaxTokens: 10, TokenRatio: 9e15})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, b.max, b.ratio, "a huge ratio saturates")
}

func TestTokenBucket_AJunkBucketIsRefilled(t *testing.T) {
	for _, tt := range []struct {
		name  string
		write func(srv *redisServer) error
	}{
		{"no number", func(srv *redisServer) error { return srv.admin(t).Set(bg, "backstop:{tokens:db}", "junk", 0).Err() }},
		{"infinite", func(srv *redisServer) error { return srv.admin(t).Set(bg, "backstop:{tokens:db}", "inf", 0).Err() }},
		{"a hash", func(srv *redisServer) error {
			if err := srv.admin(t).Del(bg, "backstop:{tokens:db}").Err(); err != nil {
				return err
			}
			return srv.admin(t).HSet(bg, "backstop:{tokens:db}", "v", 1).Err()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			var ev fleetErrs
			a := newTokenBucket(t, observedStore(t, srv, "a", &ev))
			require.NoError(t, tt.write(srv))
			a.OnFailure()
			a.sync()
			_, errs := ev.seen()
			require.Len(t, errs, 1, "an event says the bucket was bad")
			require.ErrorIs(t, errs[0], ErrBadState)
			require.Equal(t, 9.0, a.Tokens(), "a full bucket, less this sync's failure")
			a.sync()
			require.True(t, a.Shared(), "repaired: shared again, not failing every sync")
		})
	}
}
