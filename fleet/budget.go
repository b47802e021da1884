package fleet

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
)

// ratioBuckets is how many steps the fleet's window rolls by, as budget.Ratio's.
const ratioBuckets = 10

// syncRatio adds a process's calls and retries since its last sync to the fleet's
// window and returns the window's totals and how many processes share the budget, in
// one round trip, by the Redis server's clock.
//
// KEYS[1] the window's buckets (one hash per bucket, KEYS[1]:n), KEYS[2] the members
// ARGV[1] calls, ARGV[2] retries, ARGV[3] a bucket's width ms, ARGV[4] the buckets,
// ARGV[5] this process, ARGV[6] how long a silent member still counts, ms
var syncRatio = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local epoch = math.floor(now / width)
local cur = KEYS[1] .. ':' .. epoch
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', cur, 'c', ARGV[1]) end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', cur, 'r', ARGV[2]) end
redis.call('PEXPIRE', cur, width * (n + 1))
local calls, retries = 0, 0
for e = epoch - n + 1, epoch do
  local v = redis.call('HMGET', KEYS[1] .. ':' .. e, 'c', 'r')
  calls = calls + (tonumber(v[1]) or 0)
  retries = retries + (tonumber(v[2]) or 0)
end
redis.call('ZADD', KEYS[2], now, ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[6]))
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {calls, retries, redis.call('ZCARD', KEYS[2])}
`)

// tally counts a fleet budget's decisions.
type tally struct{ allowed, refused atomic.Uint64 }

// count records a decision and returns it.
func (t *tally) count(ok bool) bool {
	if ok {
		t.allowed.Add(1)
	} else {
		t.refused.Add(1)
	}
	return ok
}

// Allowed returns the number of retries allowed so far.
func (t *tally) Allowed() uint64 { return t.allowed.Load() }

// Refused returns the number of retries refused so far.
func (t *tally) Refused() uint64 { return t.refused.Load() }

// milli is the fixed point of a Ratio's allowance: thousandths of a retry.
const milli = 1000

// Ratio is a retry budget (policy.KindBudget) for a whole fleet, in the manner of
// budget.Ratio: the retries of every process in the last Window are at most Ratio ×
// the calls (first attempts) of every process in the last Window, plus MinPerSecond ×
// Window for the fleet as a whole. Fifty replicas that each allow 10 % retries
// against a dead dependency send 10 % of the fleet's calls, not fifty times that.
//
// No decision waits on Redis. Each process counts its calls and retries in memory
// and, every SyncInterval, adds them to the fleet's window and reads the window's
// totals and the number of live processes, in one round trip. Until the next sync it
// may start its share of the fleet's headroom, (Ratio × calls + floor − retries) ÷
// processes, plus Ratio for each call it has made since. The fleet may so exceed its
// budget by at most what its processes earn within one SyncInterval.
//
// When Redis is out of reach or slower than Timeout, a budget.Ratio with the same
// options, which has seen every call of this process, decides alone (fail open to
// the local budget); a policy.EventFleet says so, and counts not yet sent are kept
// for the next sync.
type Ratio struct {
	s     *Store
	name  string
	local *budget.Ratio
	link  link
	keys  []string
	ratio float64 // per call
	floor float64 // retries over the window, for the fleet
	width time.Duration

	calls, retries atomic.Int64 // not yet sent
	allowance      atomic.Int64 // thousandths of a retry this process may start before the next sync
	tally

	bg background
}

// NewRatio returns a fleet budget named name, shared through s by every process
// that builds one of the same name, with o as for budget.NewRatio (o.Clock is used by
// the local budget only: the fleet's window runs on the Redis server's clock). It
// syncs once before it returns (at most Timeout) and every SyncInterval until
// [Ratio.Close].
func NewRatio(s *Store, name string, o budget.RatioOptions) (*Ratio, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: %s: the Store is nil", ErrInvalidOptions, name)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: the budget's name is empty; want the dependency's name", ErrInvalidOptions)
	}
	local, err := budget.NewRatio(o)
	if err != nil {
		return nil, err
	}
	window := orDefault(o.Window, budget.DefaultWindow)
	if window/ratioBuckets < time.Millisecond {
		return nil, fmt.Errorf("%w: %s: Window is %v; want ≥ %v, ten buckets of 1 ms on the Redis server's clock",
			ErrInvalidOptions, name, window, ratioBuckets*time.Millisecond)
	}
	perSecond := o.MinPerSecond
	switch {
	case perSecond == 0:
		perSecond = budget.DefaultMinPerSecond
	case perSecond < 0:
		perSecond = 0
	}
	r := &Ratio{s: s, name: name, local: local, ratio: orDefault(o.Ratio, budget.DefaultRatio),
		floor: perSecond * window.Seconds(), width: window / ratioBuckets,
		keys: []string{s.key("budget", name), s.key("budget", name, "members")}}
	r.link = link{s: s, name: name}
	r.sync()
	r.bg.start(s, nil, func(bool) { r.sync() })
	return r, nil
}

// Name returns the budget's name.
func (r *Ratio) Name() string { return r.name }

// Kind returns policy.KindBudget.
func (r *Ratio) Kind() policy.Kind { return policy.KindBudget }

// Bind returns next: the retry inside talks to the budget through policy.Env.Budget.
func (r *Ratio) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Deposit counts a call.
func (r *Ratio) Deposit() {
	r.calls.Add(1)
	r.allowance.Add(int64(r.ratio * milli))
	r.local.Deposit()
}

// Withdraw allows a retry within this process's share of the fleet's budget, or,
// Redis out of reach, within the local budget.
func (r *Ratio) Withdraw() bool {
	if r.link.Local() {
		return r.count(r.local.Withdraw())
	}
	if r.allowance.Add(-milli) < 0 {
		r.allowance.Add(milli)
		return r.count(false)
	}
	r.retries.Add(1)
	return r.count(true)
}

// OnSuccess does nothing: a Ratio counts traffic, not outcomes.
func (r *Ratio) OnSuccess() {}

// OnFailure does nothing: a Ratio counts traffic, not outcomes.
func (r *Ratio) OnFailure() {}

// Level returns how many retries this process may start now.
func (r *Ratio) Level() float64 {
	if r.link.Local() {
		return r.local.Level()
	}
	return math.Floor(float64(max(0, r.allowance.Load())) / milli)
}

// Shared reports whether the budget decides on the fleet's counts now; false while
// Redis is out of reach.
func (r *Ratio) Shared() bool { return !r.link.Local() }

// ExplainStage implements policy.StageExplainer.
func (r *Ratio) ExplainStage() policy.Stage {
	st := r.local.ExplainStage()
	st.Summary = fmt.Sprintf("across the fleet (on Redis, synced every %v; this process's own budget if Redis is out of reach): ",
		r.s.interval) + st.Summary
	return st
}

// Close stops the background sync. The budget still works, on this process's counts.
func (r *Ratio) Close() error { return r.bg.stop() }

// sync sends this process's counts since the last sync and sets its share of what
// the fleet's budget allows.
func (r *Ratio) sync() {
	calls, retries := r.calls.Swap(0), r.retries.Swap(0)
	ctx, cancel := r.s.bounded(context.Background())
	defer cancel()
	ttl := 3 * max(r.s.interval, time.Second)
	res, err := syncRatio.Run(ctx, r.s.rdb, r.keys, calls, retries, r.width.Milliseconds(), ratioBuckets,
		r.s.id, ttl.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("fleet: the budget script answered %v", res)
	}
	r.link.result(err)
	if err != nil {
		// Lose nothing: a sync that timed out may still have counted them; counting
		// twice errs on the side of fewer retries.
		r.calls.Add(calls)
		r.retries.Add(retries)
		return
	}
	fleetCalls, fleetRetries, members := float64(res[0]), float64(res[1]), float64(max(1, res[2]))
	share := (r.ratio*fleetCalls + r.floor - fleetRetries) / members
	r.allowance.Store(int64(max(0, share) * milli))
}

var _ budget.Budget = (*Ratio)(nil)
