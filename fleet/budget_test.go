package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

func newRatio(t *testing.T, s *Store, o budget.RatioOptions) *Ratio {
	t.Helper()
	o.Name = "db"
	r, err := NewRatio(s, o)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// spend withdraws until the budget refuses, and returns how many it allowed.
func spend(b policy.RetryBudget) int {
	n := 0
	for b.Withdraw() {
		n++
	}
	return n
}

func TestRatio_TheFloorIsTheFleetsNotEachProcesss(t *testing.T) {
	srv := startRedis(t)
	o := budget.RatioOptions{Ratio: 0.1, MinPerSecond: 1.2, Window: 10 * time.Second} // a floor of 12 retries per window
	fleet := []*Ratio{newRatio(t, srv.store(t, "a"), o), newRatio(t, srv.store(t, "b"), o), newRatio(t, srv.store(t, "c"), o)}
	for _, r := range fleet {
		r.sync() // all three are members now
	}
	total := 0
	for _, r := range fleet {
		r.sync()
		total += spend(r)
	}
	require.Equal(t, 12, total, "three processes share one floor of 12: 4 each")

	local := 0
	for range 3 {
		local += spend(policy.Must(budget.NewRatio(o)))
	}
	require.Equal(t, 36, local, "three local budgets allow 3 × 12")
}

func TestRatio_HoldsTheRatioAcrossTheFleet(t *testing.T) {
	srv := startRedis(t)
	o := budget.RatioOptions{Ratio: 0.1, MinPerSecond: -1, Window: 10 * time.Second}
	a, b, c := newRatio(t, srv.store(t, "a"), o), newRatio(t, srv.store(t, "b"), o), newRatio(t, srv.store(t, "c"), o)
	// Only a takes traffic: 300 calls. The fleet may retry 30, wherever the retries are.
	for range 300 {
		a.Deposit()
	}
	require.Equal(t, 30, spend(a), "before it syncs, a spends what its own calls earned")
	for _, r := range []*Ratio{a, b, c} {
		r.sync()
	}
	for _, r := range []*Ratio{a, b, c} {
		r.sync() // everyone sees the three members and a's 300 calls and 30 retries
	}
	require.Equal(t, 0, spend(a)+spend(b)+spend(c), "the fleet's 30 are spent")

	// 150 more calls in b earn 15 more retries for the fleet, shared once synced.
	for range 150 {
		b.Deposit()
	}
	for _, r := range []*Ratio{b, a, c} {
		r.sync()
	}
	got := spend(a) + spend(b) + spend(c)
	require.Equal(t, 15, got)
	require.Equal(t, uint64(30+got), a.Allowed()+b.Allowed()+c.Allowed())
}

func TestRatio_RedisDownFallsBackToTheLocalBudgetAndLosesNoCounts(t *testing.T) {
	srv := startRedis(t)
	var ev events
	o := budget.RatioOptions{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second}
	a := newRatio(t, srv.store(t, "a", ev.add), o)
	srv.stop()
	for range 10 {
		a.Deposit()
	}
	a.sync()
	require.False(t, a.Shared())
	require.Equal(t, []string{"db→local"}, ev.list())
	require.Equal(t, 5, spend(a), "the local budget, which saw the 10 calls, decides")

	srv.start()
	a.sync()
	require.True(t, a.Shared())
	require.Equal(t, []string{"db→local", "db→shared"}, ev.list())
	calls, err := srv.admin(t).Eval(bg, `local s = 0
local f = redis.call('HGETALL', KEYS[1])
for i = 1, #f, 2 do if string.sub(f[i], 1, 2) == 'c:' then s = s + tonumber(f[i + 1]) end end
return s`, []string{"backstop:{budget:db}:window"}).Int()
	require.NoError(t, err)
	require.Equal(t, 10, calls, "the calls made while Redis was down reached the fleet's window")
}

func TestRatio_IsARetryBudgetForThePipeline(t *testing.T) {
	srv := startRedis(t)
	b := newRatio(t, srv.store(t, "a"), budget.RatioOptions{Ratio: 0.5, MinPerSecond: -1})
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 10, Base: time.Nanosecond}))))
	attempts := 0
	_ = p.Do(bg, func(context.Context) error { attempts++; return fault.Retryable(errDown) })
	require.Equal(t, 1, attempts, "one call earns half a retry: none")
	require.Equal(t, uint64(1), b.Refused())
}

func TestNewRatio_RefusesBadInput(t *testing.T) {
	_, err := NewRatio(nil, budget.RatioOptions{Name: "db"})
	require.ErrorIs(t, err, ErrInvalidOptions)
	srv := startRedis(t)
	s := srv.store(t, "a")
	_, err = NewRatio(s, budget.RatioOptions{Name: ""})
	require.ErrorContains(t, err, "name is empty")
	_, err = NewRatio(s, budget.RatioOptions{Name: "db", Ratio: 2})
	require.ErrorIs(t, err, budget.ErrInvalidOptions)
	_, err = NewRatio(s, budget.RatioOptions{Name: "db", Window: time.Millisecond})
	require.ErrorContains(t, err, "Window is 1ms")
}

func TestRatio_ReplicasThatStartTogetherShareOneFloor(t *testing.T) {
	srv := startRedis(t)
	o := budget.RatioOptions{Ratio: 0.1, MinPerSecond: 10, Window: 10 * time.Second} // a floor of 100 retries per window
	stores := []*Store{srv.store(t, "a"), srv.store(t, "b"), srv.store(t, "c")}
	fleet := make([]*Ratio, len(stores))
	var started sync.WaitGroup
	for i, s := range stores {
		started.Go(func() { fleet[i] = newRatio(t, s, o) }) // each syncs once as it starts
	}
	started.Wait()
	spent := 0
	for _, r := range fleet {
		spent += spend(r)
	}
	require.Equal(t, 100, spent, "three replicas started at once share the floor of 100, not 100 + 50 + 33")

	// Round after round of syncs in every order, the floor is granted once.
	for round := range 6 {
		for i := range fleet {
			r := fleet[(i+round)%len(fleet)]
			r.sync()
			spent += spend(r)
		}
		require.Equal(t, 100, spent, "round %d", round)
	}

	// Calls earn retries at Ratio, wherever they are made; the fleet spends what its
	// calls earned, no more: 0.1 × (3 × 4 × 250) = 300 on top of the floor.
	calls := 0
	for round := range 4 {
		for i := range fleet {
			r := fleet[(i+round)%len(fleet)]
			for range 250 {
				r.Deposit()
			}
			calls += 250
			r.sync()
			spent += spend(r)
			require.LessOrEqual(t, spent, 100+calls/10, "round %d: %d retries for %d calls", round, spent, calls)
		}
	}
	for _, r := range fleet {
		r.sync()
		spent += spend(r)
	}
	// The last retry or two may stay split in thirds among the three shares.
	require.GreaterOrEqual(t, spent, 100+calls/10-2, "the whole floor and every retry the calls earned, but for fractions")
	require.LessOrEqual(t, spent, 100+calls/10)
}
