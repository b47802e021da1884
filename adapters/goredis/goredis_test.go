package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

var bg = context.Background()

// retry3 makes 3 attempts a millisecond apart: the tests count attempts, not time.
func retry3() *retry.Retry {
	return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Cap: time.Millisecond}))
}

// adapted returns a client built by NewClient on p for the server at addr, and a
// counter of the round trips it makes.
func adapted(t *testing.T, addr string, p *policy.Pipeline) (*redis.Client, *counter) {
	t.Helper()
	opt := quick
	opt.Addr = addr
	c, err := goredis.NewClient(opt, p, goredis.Options{})
	require.NoError(t, err)
	n := &counter{}
	c.AddHook(n)
	t.Cleanup(func() { c.Close() })
	return c, n
}

// A replica whose primary is gone answers MASTERDOWN to every read: the server counts
// each one it refused. The same GET, made three ways, reaches it 4, 12 and 3 times.
func TestAttempts_MasterDown(t *testing.T) {
	s := startRedis(t, "--replicaof", "127.0.0.1", "1", "--replica-serve-stale-data", "no")
	adm := admin(t, s.Addr())
	sent := func() int {
		_, rejected := serverCalls(t, adm, "get")
		return rejected
	}

	// go-redis alone: MaxRetries 3 by default, MASTERDOWN retried.
	plain := ownRetries(t, s.Addr())
	err := plain.Get(bg, "k").Err()
	require.True(t, redis.IsMasterDownError(err), "GET: %v", err)
	require.Equal(t, 4, sent(), "sends of one GET by go-redis alone")

	// Backstop wrapped around the same client, naively: 3 attempts × 4 sends.
	p := policy.Must(policy.Wrap(retry3(), policy.Name("redis")))
	err = p.Do(bg, func(ctx context.Context) error { return fault.Retryable(plain.Get(ctx, "k").Err()) })
	require.Error(t, err)
	require.Equal(t, 4+12, sent(), "sends of one GET by Backstop around go-redis's retries")

	// Through the adapter: the client's retries are off, Backstop's 3 attempts remain.
	c, _ := adapted(t, s.Addr(), p)
	err = c.Get(bg, "k").Err()
	var re *retry.Error
	require.ErrorAs(t, err, &re, "GET through the adapter")
	require.Equal(t, 3, re.Attempts)
	require.True(t, redis.IsMasterDownError(err), "the last error unwraps to MASTERDOWN: %v", err)
	require.Equal(t, 4+12+3, sent(), "sends of one GET through the adapter")
	require.Contains(t, goredis.Explain(c.Options(), p), "one retry owner")
	require.Contains(t, goredis.Explain(plain.Options(), p), "12 sends per command that may run twice")
	t.Logf("server-counted sends of one GET on MASTERDOWN: go-redis alone 4, naive stack 12, adapter 3")
}

// A write the server refused did not run, so even INCR is retried on MASTERDOWN,
// LOADING or READONLY — the last as go-redis retries it: after a failover a client
// still connected to the old primary is told READONLY, and go-redis closes that
// connection, so the retry dials again (and may reach the new primary). A breaker
// counts it: the dependency cannot take writes.
func TestAttempts_ReadOnlyIsRetried(t *testing.T) {
	s := startRedis(t, "--replicaof", "127.0.0.1", "1", "--replica-serve-stale-data", "no")
	adm := admin(t, s.Addr())
	c, _ := adapted(t, s.Addr(), policy.Must(policy.Wrap(retry3())))
	err := c.Incr(bg, "n").Err()
	require.True(t, redis.IsReadOnlyError(err), "INCR on a replica: %v", err)
	require.False(t, fault.Of(err).Client, "READONLY is not the caller's fault: %v", err)
	_, rejected := serverCalls(t, adm, "incr")
	require.Equal(t, 3, rejected, "sends of INCR refused READONLY: every attempt, none ran")
}

// An INCR whose reply never came may have run: it is sent once. Marked Idempotent, or
// a command that only reads, it is retried. The server holds every write (CLIENT PAUSE
// WRITE) until the test ends, so each attempt ends at its own timeout.
func TestNonIdempotent_NotRetriedAfterTimeout(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	require.NoError(t, adm.Do(bg, "client", "pause", "600000", "write").Err())
	defer adm.Do(bg, "client", "unpause")

	p := policy.Must(policy.Wrap(retry3(), policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 50 * time.Millisecond}))))
	c, n := adapted(t, s.Addr(), p)
	require.NoError(t, c.Ping(bg).Err()) // connect before counting
	n.take()

	cases := []struct {
		name  string
		run   func() error
		sends int
	}{
		{"INCR", func() error { return c.Incr(bg, "n").Err() }, 1},
		{"INCR under Idempotent", func() error { return c.Incr(goredis.Idempotent(bg), "n").Err() }, 3},
		{"SET k v", func() error { return c.Set(bg, "k", "v", 0).Err() }, 3},
		{"SET k v NX", func() error { return c.SetNX(bg, "k", "v", 0).Err() }, 1},
		{"pipeline MSET, SET", func() error {
			_, err := c.Pipelined(bg, func(pp redis.Pipeliner) error {
				pp.MSet(bg, "a", 1, "b", 2)
				pp.Set(bg, "c", 3, 0)
				return nil
			})
			return err
		}, 3},
		{"pipeline SET, INCR", func() error {
			_, err := c.Pipelined(bg, func(pp redis.Pipeliner) error {
				pp.Set(bg, "c", 3, 0)
				pp.Incr(bg, "n")
				return nil
			})
			return err
		}, 1},
		{"MULTI SET EXEC", func() error {
			_, err := c.TxPipelined(bg, func(pp redis.Pipeliner) error {
				pp.Set(bg, "c", 3, 0)
				return nil
			})
			return err
		}, 3},
		{"MULTI INCR EXEC", func() error {
			_, err := c.TxPipelined(bg, func(pp redis.Pipeliner) error {
				pp.Incr(bg, "n")
				return nil
			})
			return err
		}, 1},
	}
	for _, tc := range cases {
		err := tc.run()
		var to interface{ Timeout() bool } // the attempt's deadline, or the read deadline go-redis set from it
		require.True(t, errors.As(err, &to) && to.Timeout(), "%s while writes are held: %v, want a timeout", tc.name, err)
		if got := n.take(); got != tc.sends {
			t.Errorf("%s while writes are held: %d sends, want %d", tc.name, got, tc.sends)
		}
	}
}

// The server is killed under load: a blocked BLPOP returns at once, the calls that
// follow fail, the breaker opens, and then calls end without a send.
func TestKilled_BreakerOpens(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	br := policy.Must(breaker.New(breaker.Options{Name: "redis", ConsecutiveFailures: 3, OpenTimeout: time.Hour}))
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 10 * time.Second})), br, retry3()))
	c, n := adapted(t, s.Addr(), p)
	for range 5 {
		require.NoError(t, c.Set(bg, "k", "v", 0).Err())
	}

	n.take()
	blpop := make(chan error, 1)
	go func() { blpop <- c.BLPop(bg, 0, "queue").Err() }()
	for { // a round trip per look, until the server says the BLPOP waits
		info, err := adm.Info(bg, "clients").Result()
		require.NoError(t, err)
		if strings.Contains(info, "blocked_clients:1") {
			break
		}
	}
	s.Stop()
	err := <-blpop
	require.Error(t, err, "BLPOP blocked when the server died")
	require.True(t, fault.Of(err).Permanent, "BLPOP's reply was lost: not retried (%v)", err)
	require.Equal(t, 1, n.take(), "sends of the BLPOP")

	var opened int
	for i := 1; i <= 10 && opened == 0; i++ {
		err := c.Get(bg, "k").Err()
		require.Error(t, err, "GET %d after the kill", i)
		if errors.Is(err, breaker.ErrOpen) {
			opened = i
		}
	}
	// 3 consecutive failures open it: the BLPOP's and two GETs'.
	require.Equal(t, 3, opened, "the GET refused first by the breaker")
	n.take()
	err = c.Get(bg, "k").Err()
	require.ErrorIs(t, err, policy.ErrRejected)
	require.Equal(t, 0, n.take(), "sends of a GET while the breaker is open")
}

// A hedge never sends a command twice at once: both sends would write one command's
// reply. The server holds the SET until the deadline; it was sent once.
func TestHook_NeverHedged(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 200 * time.Millisecond})),
		policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 3, Delay: time.Millisecond}))))
	c, n := adapted(t, s.Addr(), p)
	require.NoError(t, c.Ping(bg).Err())
	require.NoError(t, adm.Do(bg, "client", "pause", "600000", "write").Err())
	defer adm.Do(bg, "client", "unpause")
	n.take()
	err := c.Set(bg, "k", "v", 0).Err()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, n.take(), "sends of a SET under a hedge")
}

// A missing key is redis.Nil through the adapter, as through go-redis alone: the
// hook's success is no success of the command.
func TestHook_KeepsNil(t *testing.T) {
	s := startRedis(t)
	c, _ := adapted(t, s.Addr(), policy.Must(policy.Wrap(retry3())))
	require.ErrorIs(t, c.Get(bg, "missing").Err(), redis.Nil, "GET of a missing key")
	require.ErrorIs(t, c.Eval(bg, "return nil", nil).Err(), redis.Nil, "EVAL returning nil")
	require.NoError(t, c.Set(bg, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(bg, "k").Val())
}
