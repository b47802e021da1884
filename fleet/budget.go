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
// window and grants the process its share of the fleet's headroom, in one round trip,
// by the Redis server's clock.
//
// The headroom is Ratio × the window's calls + the floor − its retries. A process's
// grant is at most its fair share of it (headroom ÷ live members) and at most what the
// other members' grants leave of it: each grant is held, in KEYS[3], until its member
// syncs again (its retries then are in the window; the rest is given back) or is gone.
// So members that sync one after another — replicas started together — do not each
// take a share of the same headroom.
//
// KEYS[1] the window (hash: "c:bucket" → calls, "r:bucket" → retries, a bucket being
// the server's time ÷ its width), KEYS[2] the members, KEYS[3] the grants held (hash:
// member → thousandths of a retry). The script touches no other key, so that Redis
// Cluster, its proxies and managed equivalents route it by KEYS alone, even while its
// slot migrates.
// ARGV[1] calls, ARGV[2] retries, ARGV[3] a bucket's width ms, ARGV[4] the buckets,
// ARGV[5] this process, ARGV[6] how long a silent member still counts, ms, ARGV[7]
// Ratio, ARGV[8] the floor (retries per window)
//
// The reply is {calls, retries, members, this process's grant in thousandths}.
var syncRatio = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width, n, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local epoch = math.floor(now / width)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', KEYS[1], 'c:' .. epoch, ARGV[1]) end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[1], 'r:' .. epoch, ARGV[2]) end
local calls, retries = 0, 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local what, e = string.match(fields[i], '^([cr]):(%d+)$')
  e = tonumber(e)
  local v = tonumber(fields[i + 1])
  if not e or not v or v ~= v or e <= epoch - n then
    redis.call('HDEL', KEYS[1], fields[i])
  elseif e <= epoch and v > 0 and v < math.huge then
    if what == 'c' then calls = calls + v else retries = retries + v end
  end
end
redis.call('PEXPIRE', KEYS[1], width * (n + 1))
redis.call('ZADD', KEYS[2], now, ARGV[5])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl)
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('HDEL', KEYS[3], m)
end
redis.call('PEXPIRE', KEYS[2], ttl)
local members = redis.call('ZCARD', KEYS[2])
redis.call('HDEL', KEYS[3], ARGV[5])
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do held = held + math.max(0, tonumber(v) or 0) end
local headroom = tonumber(ARGV[7]) * calls + tonumber(ARGV[8]) - retries
local grant = math.floor(math.max(0, math.min(headroom / members, headroom - held / 1000)) * 1000)
if grant > 0 then redis.call('HSET', KEYS[3], ARGV[5], grant) end
redis.call('PEXPIRE', KEYS[3], ttl)
return {calls, retries, members, grant}
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

// Ratio is a retry budget (Placement.Kind budget.Kind) for a whole fleet, in the manner of
// budget.Ratio: the retries of every process in the last Window are at most Ratio ×
// the calls (first attempts) of every process in the last Window, plus MinPerSecond ×
// Window for the fleet as a whole. Fifty replicas that each allow 10 % retries
// against a dead dependency send 10 % of the fleet's calls, not fifty times that.
//
// No decision waits on Redis. Each process counts its calls and retries in memory
// and, every SyncInterval, adds them to the fleet's window and takes a grant, in one
// round trip. Until the next sync it may start its grant, plus Ratio for each call
// it has made since. A grant is at most the process's share of the fleet's headroom,
// (Ratio × calls + floor − retries) ÷ processes, and at most what the grants other
// processes hold leave of the headroom; a grant is held until its process syncs
// again. So processes that start together, or sync one after another, never grant
// the same headroom twice: the first to sync may take a whole share, the next ones
// what it leaves, and at their next syncs the shares even out. The fleet may so
// exceed its budget by at most what its processes earn within one SyncInterval (the
// calls they make between syncs, and a window's buckets rolling on).
//
// When Redis is out of reach or slower than Timeout, a budget.Ratio with the same
// options, which has seen every call of this process, decides alone (fail open to
// the local budget); a event.Fleet says so, and counts not yet sent are kept
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

// NewRatio returns a fleet budget named o.Name, shared through s by every process
// that builds one of the same name, with o as for budget.NewRatio (o.Clock is used by
// the local budget only: the fleet's window runs on the Redis server's clock). It
// syncs once before it returns (at most Timeout) and every SyncInterval until
// [Ratio.Close].
func NewRatio(s *Store, o budget.RatioOptions) (*Ratio, error) {
	name := o.Name
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
		keys: []string{s.key("budget", name, "window"), s.key("budget", name, "members"), s.key("budget", name, "grants")}}
	r.link = link{s: s, name: name, kind: KindBudget, stage: budget.Kind}
	r.sync()
	r.bg.start(s, nil, func(bool) { r.sync() })
	return r, nil
}

// Name returns the budget's name.
func (r *Ratio) Name() string { return r.name }

// Placement is a budget's.
func (r *Ratio) Placement() policy.Placement { return budget.Place }

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

// Close stops the background sync and gives this process's grant back to the fleet
// (within Timeout; a grant not given back lapses when the process stops counting as
// a member). The budget still works, on this process's counts.
func (r *Ratio) Close() error {
	err := r.bg.stop()
	ctx, cancel := r.s.bounded(context.Background())
	defer cancel()
	_ = r.s.rdb.HDel(ctx, r.keys[2], r.s.id).Err() // best effort: it lapses anyway
	return err
}

// sync sends this process's counts since the last sync and sets its share of what
// the fleet's budget allows.
func (r *Ratio) sync() {
	calls, retries := r.calls.Swap(0), r.retries.Swap(0)
	ctx, cancel := r.s.bounded(context.Background())
	defer cancel()
	ttl := 3 * max(r.s.interval, time.Second)
	res, err := syncRatio.Run(ctx, r.s.rdb, r.keys, calls, retries, r.width.Milliseconds(), ratioBuckets,
		r.s.id, ttl.Milliseconds(), r.ratio, r.floor).Int64Slice()
	if err == nil && len(res) != 4 {
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
	// The grant leaves out what happened here while the script ran: the retries then
	// spend it, the calls then earn on top of it (both are sent at the next sync).
	r.allowance.Store(res[3] - milli*r.retries.Load() + int64(r.ratio*milli)*r.calls.Load())
}

var _ budget.Budget = (*Ratio)(nil)
