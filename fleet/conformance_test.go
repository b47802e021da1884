package fleet

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func TestConformance(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(t, "a")
	t.Run("Breaker", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			b, err := NewBreaker(s, breaker.Options{Name: "db"})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b
		})
	})
	t.Run("Ratio", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			b, err := NewRatio(s, budget.RatioOptions{Name: "db"})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b
		})
	})
	t.Run("TokenBucket", func(t *testing.T) {
		policytest.Run(t, func() policy.Policy {
			b, err := NewTokenBucket(s, budget.TokenBucketOptions{Name: "db", MaxTokens: 10, TokenRatio: 0.1})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			return b
		})
	})
}

// TestFleet_RedisKilledMidRun: three replicas call a healthy dependency through
// Wrap(fleet breaker, fleet budget, retry) with their background syncs running;
// Redis is killed halfway. Every call succeeds, every replica ends up deciding
// locally, and nothing is left running (goleak).
func TestFleet_RedisKilledMidRun(t *testing.T) {
	srv := startRedis(t)
	var ev events
	type replica struct {
		p  *policy.Pipeline
		br *Breaker
		bu *Ratio
	}
	var rs []replica
	for range 3 {
		s := policy.Must(New(srv.client(t), Options{Observer: fleetEvents(ev.add)}))
		br, err := NewBreaker(s, breaker.Options{Name: "db"})
		require.NoError(t, err)
		t.Cleanup(func() { br.Close() })
		bu, err := NewRatio(s, budget.RatioOptions{Name: "db"})
		require.NoError(t, err)
		t.Cleanup(func() { bu.Close() })
		rs = append(rs, replica{policy.Must(policy.Wrap(br, bu, policy.Must(retry.New(retry.Options{})))), br, bu})
	}
	var served atomic.Int64
	call := func() {
		for _, r := range rs {
			require.NoError(t, r.p.Do(bg, func(context.Context) error { served.Add(1); return nil }))
		}
	}
	for range 100 {
		call()
	}
	srv.stop()
	for _, r := range rs {
		r.br.sync()
		r.bu.sync()
		require.False(t, r.br.Shared())
		require.False(t, r.bu.Shared())
	}
	for range 100 {
		call()
	}
	require.Equal(t, int64(600), served.Load(), "every call served, before and after Redis died")
	require.Len(t, ev.list(), 6, "each of the six policies reported its fall back once: %v", ev.list())
}
