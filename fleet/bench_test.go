package fleet

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/shed"
)

// roundTrips is a go-redis hook that counts the commands sent.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// benchStore returns a Store with its background sync on, as in production, and
// the counter of its round trips.
func benchStore(b *testing.B, srv *redisServer) (*Store, *roundTrips) {
	c := srv.client(b)
	rt := &roundTrips{}
	c.AddHook(rt)
	return policy.Must(New(c, Options{})), rt
}

// report adds Redis round trips per op, counted from the start of the timed loop.
func report(b *testing.B, rt *roundTrips, start int64) {
	b.ReportMetric(float64(rt.n.Load()-start)/float64(b.N), "redis/op")
}

// The success path of Wrap(breaker, budget, retry): local policies, then their fleet twins.
func BenchmarkStack_Local(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(breaker.New(breaker.Options{Name: "db"})), policy.Must(budget.NewRatio(budget.RatioOptions{})),
		policy.Must(retry.New(retry.Options{}))))
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Do(bg, fn)
	}
}

func BenchmarkStack_Fleet(b *testing.B) {
	s, rt := benchStore(b, startRedis(b))
	br, err := NewBreaker(s, breaker.Options{Name: "db"})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	bu, err := NewRatio(s, budget.RatioOptions{Name: "db"})
	if err != nil {
		b.Fatal(err)
	}
	defer bu.Close()
	p := policy.Must(policy.Wrap(br, bu, policy.Must(retry.New(retry.Options{}))))
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	start := rt.n.Load()
	for b.Loop() {
		_ = p.Do(bg, fn)
	}
	report(b, rt, start)
}

// A retry decision: Deposit then Withdraw, as a call that fails once makes.
func BenchmarkRetryDecision_LocalRatio(b *testing.B) {
	r := policy.Must(budget.NewRatio(budget.RatioOptions{Ratio: 1}))
	b.ReportAllocs()
	for b.Loop() {
		r.Deposit()
		r.Withdraw()
	}
}

func BenchmarkRetryDecision_FleetRatio(b *testing.B) {
	s, rt := benchStore(b, startRedis(b))
	r, err := NewRatio(s, budget.RatioOptions{Name: "db", Ratio: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	start := rt.n.Load()
	for b.Loop() {
		r.Deposit()
		r.Withdraw()
	}
	report(b, rt, start)
}

func BenchmarkRetryDecision_LocalTokenBucket(b *testing.B) {
	t := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 1}))
	b.ReportAllocs()
	for b.Loop() {
		t.OnFailure()
		t.Withdraw()
		t.OnSuccess()
	}
}

func BenchmarkRetryDecision_FleetTokenBucket(b *testing.B) {
	s, rt := benchStore(b, startRedis(b))
	t, err := NewTokenBucket(s, budget.TokenBucketOptions{Name: "db", MaxTokens: 10, TokenRatio: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	b.ReportAllocs()
	start := rt.n.Load()
	for b.Loop() {
		t.OnFailure()
		t.Withdraw()
		t.OnSuccess()
	}
	report(b, rt, start)
}

// One quota decision for one client.
func BenchmarkQuota_Local(b *testing.B) {
	q := shed.NewLocalQuotas(0)
	b.ReportAllocs()
	for b.Loop() {
		q.Allow(bg, "alice", 1e9, 1e9)
	}
}

func BenchmarkQuota_Fleet(b *testing.B) {
	s, rt := benchStore(b, startRedis(b))
	q, err := NewQuota(s, QuotaOptions{Name: "api", MaxLocalClients: 0})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := rt.n.Load()
	for b.Loop() {
		if _, ok := q.Allow(bg, "alice", 1e9, 1e9); !ok || !q.Shared() {
			b.Fatal("refused, or Redis out of reach")
		}
	}
	report(b, rt, start)
}
