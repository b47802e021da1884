package goredis_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// An INCR whose reply is lost ran on the server. Toxiproxy loses one reply (a
// reset_peer on the server's replies, armed while the client's connection is idle;
// the next connection finds the network healed). go-redis alone sends the INCR again
// on a new connection and reports one increment of two; so does a Backstop retry
// around it. The adapter reports the error after one run; under Idempotent it runs
// twice, as asked. Through Once it runs once and returns its reply.
func TestAttempts_LostReplyOfIncr(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	f := startFaults(t, s.Addr())
	runs := func() int {
		calls, _ := serverCalls(t, adm, "incr")
		return calls
	}
	opt := quick
	opt.Addr, opt.PoolSize, opt.Dialer = f.Addr(), 1, f.dial
	own := opt
	own.MinRetryBackoff, own.MaxRetryBackoff = time.Millisecond, time.Millisecond
	plain := redis.NewClient(&own) // go-redis's own retries, as they come
	defer plain.Close()
	c, err := goredis.NewClient(opt, policy.Must(policy.Wrap(retry3())), goredis.Options{})
	require.NoError(t, err)
	defer c.Close()

	lose := func(c *redis.Client) {
		t.Helper()
		require.NoError(t, c.Ping(bg).Err()) // an idle connection for the toxic to meet
		f.arm(t, "reset_peer", "downstream")
	}
	value := func() int {
		n, err := adm.Get(bg, "n").Int()
		require.NoError(t, err)
		return n
	}

	lose(plain)
	require.NoError(t, plain.Incr(bg, "n").Err(), "INCR by go-redis alone")
	require.Equal(t, 2, runs(), "runs of one INCR by go-redis alone: its reply lost, sent again")

	lose(plain)
	p := policy.Must(policy.Wrap(retry3()))
	err = p.Do(bg, func(ctx context.Context) error { return fault.Retryable(plain.Incr(ctx, "n").Err()) })
	require.NoError(t, err, "INCR by Backstop around go-redis")
	require.Equal(t, 2+2, runs(), "runs of one INCR by Backstop around go-redis's retries")

	lose(c)
	err = c.Incr(bg, "n").Err()
	require.ErrorIs(t, err, io.EOF, "INCR through the adapter")
	require.True(t, fault.Of(err).Permanent, "a lost reply of INCR is Permanent: %v", err)
	require.Equal(t, 2+2+1, runs(), "runs of one INCR through the adapter")

	lose(c)
	require.NoError(t, c.Incr(goredis.Idempotent(bg), "n").Err(), "INCR under Idempotent through the adapter")
	require.Equal(t, 2+2+1+2, runs(), "runs of one INCR under Idempotent through the adapter")

	// Once's script is loaded by a first call, so the reply lost is the INCR's.
	require.NoError(t, goredis.Once(bg, c, "once:0", time.Minute, "incr", "m").Err())
	lose(c)
	dials := f.dials.Load()
	got, err := goredis.Once(bg, c, "once:1", time.Minute, "incr", "n").Int()
	require.NoError(t, err, "INCR through Once")
	require.Equal(t, 2+2+1+2+1+1, runs(), "runs of one INCR through Once (and one of m): the lost run, then its kept reply")
	require.Equal(t, int64(1), f.dials.Load()-dials, "connections Once dialled: one, for the send that found the kept reply")
	require.Equal(t, value(), got, "Once's reply: the run's")
	require.Equal(t, 2+2+1+2+1, value(), "the counter: every run counted")
}
