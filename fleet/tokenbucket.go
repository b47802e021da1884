package fleet

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
)

// syncTokens applies a process's failures and successes since its last sync to the
// fleet's bucket and returns its tokens, in thousandths, in one round trip. A bucket
// not seen yet starts full, and so does one that holds what no bucket writes (another
// type, or no finite number), which the reply's second value (1) reports.
//
// KEYS[1] the bucket; ARGV[1] failures, ARGV[2] successes, ARGV[3] the capacity,
// ARGV[4] what a success refunds (both in thousandths)
var syncTokens = redis.NewScript(`
local max = tonumber(ARGV[3])
local v, bad = max, 0
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  local n = tonumber(redis.call('GET', KEYS[1]))
  if n and n == n and n > -math.huge and n < math.huge then v = math.floor(n) else bad = 1 end
elseif kind ~= 'none' then
  redis.call('DEL', KEYS[1])
  bad = 1
end
v = math.max(0, v - tonumber(ARGV[1]) * 1000)
v = math.min(max, v + tonumber(ARGV[2]) * tonumber(ARGV[4]))
redis.call('SET', KEYS[1], v, 'PX', 86400000)
return {v, bad}
`)

// TokenBucket is gRFC A6's retry throttling (budget.TokenBucket) with one bucket for
// a whole fleet: every retryable failure in any process takes a token, every success
// refunds tokenRatio, and no process retries once the fleet's tokens are at or below
// half. The fleet as a whole tolerates the failures one client of A6 tolerates,
// instead of each replica spending a bucket of its own.
//
// No decision waits on Redis: a process keeps the fleet's count as of its last sync,
// moved by its own failures and successes since, and sends those every SyncInterval
// (one round trip, which returns the fleet's count). Other processes' failures so
// reach it within one SyncInterval. When Redis is out of reach, a budget.TokenBucket
// of the same settings, fed by this process all along, decides alone. A bucket key
// holding what no bucket writes is refilled, reported as for a breaker
// ([ErrBadState]).
type TokenBucket struct {
	s     *Store
	name  string
	key   []string
	local *budget.TokenBucket
	link  link
	max   int64 // thousandths
	ratio int64 // thousandths per success

	tokens              atomic.Int64 // the fleet's, as of the last sync, moved by this process since
	failures, successes atomic.Int64 // not yet sent
	tally
	bg background
}

// NewTokenBucket returns a fleet token bucket named o.Name, validated as by
// budget.NewTokenBucket, shared through s by every process that builds one of the
// same name. It syncs once before it returns (at most
// Timeout) and every SyncInterval until [TokenBucket.Close].
func NewTokenBucket(s *Store, o budget.TokenBucketOptions) (*TokenBucket, error) {
	name, maxTokens, tokenRatio := o.Name, o.MaxTokens, o.TokenRatio
	if s == nil {
		return nil, fmt.Errorf("%w: %s: the Store is nil", ErrInvalidOptions, name)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: the budget's name is empty; want the dependency's name", ErrInvalidOptions)
	}
	local, err := budget.NewTokenBucket(o)
	if err != nil {
		return nil, err
	}
	b := &TokenBucket{s: s, name: name, key: []string{s.key("tokens", name)}, local: local,
		max: int64(math.Round(local.MaxTokens() * milli))}
	b.ratio = b.max // a ratio of maxTokens or more saturates, as in budget.TokenBucket
	if tokenRatio < maxTokens {
		b.ratio = int64(math.Floor(tokenRatio*milli + 1e-6))
	}
	b.tokens.Store(b.max)
	b.link = link{s: s, name: name, kind: KindBudget, stage: budget.Kind}
	b.sync()
	b.bg.start(s, nil, func(bool) { b.sync() })
	return b, nil
}

// Name returns the budget's name.
func (b *TokenBucket) Name() string { return b.name }

// Placement is a budget's.
func (b *TokenBucket) Placement() policy.Placement { return budget.Place }

// Bind returns next: the retry inside talks to the budget through policy.Env.Budget.
func (b *TokenBucket) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Deposit does nothing: the bucket is filled by successes, not by calls.
func (b *TokenBucket) Deposit() {}

// Withdraw reports whether a retry may start: whether the fleet's tokens, as this
// process knows them, are above half. It takes no token.
func (b *TokenBucket) Withdraw() bool {
	ok := b.tokens.Load()*2 > b.max
	if b.link.Local() {
		ok = b.local.Withdraw()
	}
	return b.count(ok)
}

// OnFailure takes a token for an attempt that failed with a retryable error.
func (b *TokenBucket) OnFailure() {
	b.failures.Add(1)
	b.move(-milli)
	b.local.OnFailure()
}

// OnSuccess refunds tokenRatio for a successful call.
func (b *TokenBucket) OnSuccess() {
	b.successes.Add(1)
	b.move(b.ratio)
	b.local.OnSuccess()
}

// move adds d to the known tokens, within [0, max].
func (b *TokenBucket) move(d int64) {
	for {
		t := b.tokens.Load()
		n := min(max(t+d, 0), b.max)
		if t == n || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Tokens returns the fleet's tokens as this process knows them (its own bucket's
// while Redis is out of reach).
func (b *TokenBucket) Tokens() float64 {
	if b.link.Local() {
		return b.local.Tokens()
	}
	return float64(b.tokens.Load()) / milli
}

// Level returns Tokens.
func (b *TokenBucket) Level() float64 { return b.Tokens() }

// Shared reports whether the bucket decides on the fleet's tokens now; false while
// Redis is out of reach.
func (b *TokenBucket) Shared() bool { return !b.link.Local() }

// ExplainStage implements policy.StageExplainer.
func (b *TokenBucket) ExplainStage() policy.Stage {
	st := b.local.ExplainStage()
	st.Summary = fmt.Sprintf("one bucket for the fleet (on Redis, synced every %v; this process's own if Redis is out of reach): ",
		b.s.interval) + st.Summary
	return st
}

// Close stops the background sync. The bucket still works, on this process's count.
func (b *TokenBucket) Close() error { return b.bg.stop() }

// sync sends this process's failures and successes since the last sync and takes
// the fleet's count.
func (b *TokenBucket) sync() {
	failures, successes := b.failures.Swap(0), b.successes.Swap(0)
	ctx, cancel := b.s.bounded(context.Background())
	defer cancel()
	res, err := syncTokens.Run(ctx, b.s.rdb, b.key, failures, successes, b.max, b.ratio).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("fleet: the token bucket script answered %v", res)
	}
	if err == nil && res[1] != 0 {
		// Repaired, and this sync counted: the next one shares again.
		b.link.result(fmt.Errorf("%w: %s held no token count: refilled", ErrBadState, b.key[0]))
		b.tokens.Store(min(max(res[0], 0), b.max))
		return
	}
	b.link.result(err)
	if err != nil {
		b.failures.Add(failures) // lose nothing: sent on the next sync
		b.successes.Add(successes)
		return
	}
	// What happened here while the script ran is counted again at the next sync;
	// until then the fleet's count stands.
	b.tokens.Store(min(max(res[0], 0), b.max))
}

var _ budget.Budget = (*TokenBucket)(nil)
