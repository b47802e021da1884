package goredis_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A cut is how one call's first send loses its connection.
type cut struct {
	kind   string // "reset_peer" or "timeout"
	stream string // "upstream": the request is lost; "downstream": its reply is
}

// cuts returns the faults of a run of n calls: from a fixed seed, about 40 % of
// calls meet one, of either kind, in either direction.
func cuts(n int) []*cut {
	r := rand.New(rand.NewPCG(3, 4))
	plan := make([]*cut, n)
	kinds, streams := []string{"reset_peer", "reset_peer", "reset_peer", "timeout"}, []string{"upstream", "downstream"}
	for i := range plan {
		if r.IntN(5) < 2 {
			plan[i] = &cut{kind: kinds[r.IntN(4)], stream: streams[r.IntN(2)]}
		}
	}
	return plan
}

// faultedClient returns a client built by NewClient, through f, with one pooled
// connection, whose retries are 4 attempts of at most 200 ms each.
func faultedClient(t *testing.T, f *faults) *redis.Client {
	t.Helper()
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 10 * time.Second})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: time.Millisecond, Cap: time.Millisecond})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * time.Millisecond}))))
	opt := quick
	opt.Addr, opt.PoolSize, opt.Dialer = f.Addr(), 1, f.dial
	c, err := goredis.NewClient(opt, p, goredis.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Under reset_peer and timeout toxics, an INCR whose reply was lost had run: the
// adapter reports it failed, and cannot say whether it ran. Sent through Once with a
// token per call, every call succeeds, runs once, and gets its own reply.
func TestFaults_LostRepliesResolvedByOnce(t *testing.T) {
	const n = 60
	s := startRedis(t)
	adm := admin(t, s.Addr())
	f := startFaults(t, s.Addr())
	c := faultedClient(t, f)
	plan := cuts(n)
	value := func(key string) int {
		v, err := adm.Get(bg, key).Int()
		if err == redis.Nil {
			return 0
		}
		require.NoError(t, err)
		return v
	}
	run := func(i int, send func() error) (err error, ran bool) {
		require.NoError(t, c.Ping(bg).Err()) // a pooled connection for the toxic to meet
		before := value("n")
		if plan[i] != nil {
			f.arm(t, plan[i].kind, plan[i].stream)
		}
		err = send()
		f.heal()
		return err, value("n") > before
	}

	// Plain INCR through the adapter: a lost reply is Permanent, not retried.
	var failed, failedRan, lostReplies int
	for i := range n {
		err, ran := run(i, func() error { return c.Incr(bg, "n").Err() })
		if plan[i] != nil && plan[i].stream == "downstream" {
			lostReplies++
		}
		if err != nil {
			failed++
			if ran {
				failedRan++
			}
		} else {
			require.True(t, ran, "INCR %d returned nil: it ran", i)
		}
	}
	t.Logf("INCR through the adapter: %d calls, %d failed, of which %d had run (their reply was lost)", n, failed, failedRan)
	require.Equal(t, lostReplies, failedRan, "failed INCRs that ran: those whose reply was lost")
	require.Equal(t, failed+value("n")-n, failedRan, "the counter: every INCR that ran")

	// The same faults, each INCR through Once with a token of its own.
	require.NoError(t, adm.Del(bg, "n").Err())
	replies := map[int64]bool{}
	for i := range n {
		var reply int64
		err, ran := run(i, func() error {
			var err error
			reply, err = goredis.Once(bg, c, fmt.Sprintf("once:%d", i), time.Minute, "incr", "n").Int64()
			return err
		})
		require.NoError(t, err, "INCR %d through Once (%+v)", i, plan[i])
		require.True(t, ran, "INCR %d through Once ran", i)
		require.False(t, replies[reply], "INCR %d: reply %d given twice", i, reply)
		replies[reply] = true
	}
	require.Equal(t, n, value("n"), "the counter: every INCR through Once ran once")
	t.Logf("INCR through Once: %d calls, %d ok, counter %d", n, len(replies), value("n"))
}
