package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// readState is the head of the breaker's scripts: it reads the shared state by the
// Redis server's clock and repairs what no fleet breaker writes, setting bad (a sum of
// the bad… flags) to say what it repaired. A key of another type, or fields that are
// not the numbers a breaker writes (an infinite or NaN open time among them), is
// treated as absent (closed, in a new generation); an open time more than ARGV[4] ms
// ahead is cut to that.
//
// KEYS[1] the state (hash: s 0 closed / 2 open, g generation, u open until, ms)
// KEYS[2] the probe lease (string "generation process", with an expiry)
const readState = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local maxOpen = tonumber(ARGV[4])
local function int(x)
  local n = tonumber(x)
  if n and n == n and n >= 0 and n < 9007199254740992 and n == math.floor(n) then return n end
end
local function finite(x)
  local n = tonumber(x)
  if n and n == n and n > -math.huge and n < math.huge then return math.floor(n) end
end
local s, g, u, bad = 0, 0, 0, 0
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then
  local v = redis.call('HMGET', KEYS[1], 's', 'g', 'u')
  s, g, u = int(v[1]), int(v[2]), finite(v[3])
  if (s ~= 0 and s ~= 2) or not g or not u then
    s, g, u, bad = 0, (g and g + 1) or now, 0, 1
  elseif s == 2 and u - now > maxOpen then
    u, bad = now + maxOpen, 2
  end
  if bad > 0 then
    redis.call('HSET', KEYS[1], 's', s, 'g', g, 'u', u)
    redis.call('PEXPIRE', KEYS[1], 86400000)
  end
elseif kind ~= 'none' then
  redis.call('DEL', KEYS[1])
  s, g, u, bad = 0, now, 0, 1
end
`

// Flags of what readState and leaseProbe repaired.
const (
	badState = 1 // the state was not a hash of the numbers a breaker writes: reset to closed
	badOpen  = 2 // the state was open until further ahead than this breaker ever opens: cut
	badLease = 4 // the probe lease had no expiry, a longer one, or a value no breaker writes: removed
)

// syncBreaker brings a breaker's shared state up to date and, when ARGV[1] asks,
// changes it, in one round trip. Times are the Redis server's, so the clocks of the
// fleet's hosts need not agree; the reply is {s, g, time left open ms, bad}.
//
// KEYS as for readState; ARGV[1] "" (read), "open" (this process's breaker tripped,
// or its probe failed), "closed" (its probe succeeded); ARGV[2] the generation it
// knew; ARGV[3] how long to stay open, ms; ARGV[4] the longest open time, ms.
var syncBreaker = redis.NewScript(readState + `
if ARGV[1] == 'open' and (s == 0 or now >= u) then
  s, g, u = 2, g + 1, now + math.min(tonumber(ARGV[3]), maxOpen)
elseif ARGV[1] == 'closed' and s == 2 and g == tonumber(ARGV[2]) and now >= u then
  s, g, u = 0, g + 1, 0
else
  if s == 2 then return {s, g, u - now, bad} end
  return {s, g, 0, bad}
end
redis.call('HSET', KEYS[1], 's', s, 'g', g, 'u', u)
redis.call('PEXPIRE', KEYS[1], 86400000)
redis.call('DEL', KEYS[2])
if s == 2 then return {s, g, u - now, bad} end
return {s, g, 0, bad}
`)

// leaseProbe grants the probe lease of a half-open breaker to one process, and only
// for the open episode it asks about: a process that missed a reopen is refused and
// told the state. A lease already there that is not one a breaker takes — no expiry,
// an expiry beyond ARGV[4], another type, or a value not "generation process" of
// the current generation — is treated as absent. The reply is {granted 0/1, s, g,
// time left open ms, bad}.
//
// KEYS as for readState; ARGV[1] the generation, ARGV[2] the process, ARGV[3] the
// lease's length, ms; ARGV[4] the longest open time, ms, which bounds a lease too.
var leaseProbe = redis.NewScript(readState + `
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' then
  local ok = kind == 'string'
  if ok then
    local ttl = redis.call('PTTL', KEYS[2])
    local lg = tonumber(string.match(redis.call('GET', KEYS[2]), '^(%d+) .'))
    ok = ttl > 0 and ttl <= maxOpen and lg == g and s == 2
  end
  if not ok then
    redis.call('DEL', KEYS[2])
    bad = bad + 4
  end
end
if s ~= 2 then return {0, s, g, 0, bad} end
if g == tonumber(ARGV[1]) and now >= u and redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2], 'NX', 'PX', ARGV[3]) then
  return {1, s, g, u - now, bad}
end
return {0, s, g, u - now, bad}
`)

// ErrBadState is matched by the Err of a event.Fleet that reports shared state
// in Redis that no fleet policy writes (a key of another type, fields that are not
// numbers, a probe lease without an expiry, an open time beyond the breaker's
// longest). The state was repaired as the error says; the policy decides on its own
// until its next sync finds the repaired state.
var ErrBadState = errors.New("fleet: bad shared state in Redis")

// badStateError describes what a breaker's script repaired.
func (f *Breaker) badStateError(bad int64) error {
	var what []string
	if bad&badState != 0 {
		what = append(what, f.state+" held no breaker state: reset to closed")
	}
	if bad&badOpen != 0 {
		what = append(what, fmt.Sprintf("%s was open for longer than the breaker's longest open time (%v): cut to it", f.state, f.maxOpen))
	}
	if bad&badLease != 0 {
		what = append(what, fmt.Sprintf("%s held no probe lease of the current open episode with an expiry of at most %v: removed", f.probe, f.maxOpen))
	}
	return fmt.Errorf("%w: %s", ErrBadState, strings.Join(what, "; "))
}

// Breaker is a circuit breaker (Placement.Kind breaker.Kind) whose state the
// processes of a fleet share through Redis. When one process's breaker trips, every
// process refuses calls until the same moment. When that moment comes, one process in
// the fleet — the one that takes the probe lease — lets its probes through, and
// their outcome closes or reopens the breaker everywhere.
//
// Each process counts its own calls with a local [breaker.Breaker] (so a trip needs
// no round trip on the call path) and shares only transitions. A call makes no Redis
// request at all, except while the fleet's breaker is half-open: then the first call
// in a process asks for the probe lease, once per open episode. A background loop
// refreshes the shared state every SyncInterval and publishes this process's
// transitions at once.
//
// When Redis is out of reach or slower than Timeout, the local breaker decides alone
// (it is a whole breaker: it trips, refuses and probes by itself), an
// [event.Fleet] says so, and on Redis's return the local state is published
// again. Events, refusals, the inspection page and metrics work as for any
// breaker: register [Breaker.Local].
//
// ForceOpen and Reset on the local breaker act on this process only.
//
// A dead dependency therefore sees the probes of one process at a time: with
// default Options about 1.25 a second from the whole fleet, one a probe interval.
//
// Every probe lease expires: it lasts OpenTimeout. State in Redis that no fleet
// breaker writes — a key of another type, fields that are not finite numbers, a probe
// lease with no expiry, with one longer than the breaker's longest open time, or of
// another open episode — is treated as absent and removed by the first script that
// meets it; an open time further ahead than the breaker's longest open time,
// MaxOpenTimeout × (1 + OpenJitter), is cut to it. Either way a event.Fleet to
// local whose Err matches [ErrBadState] says what was repaired, and the next sync
// shares the repaired state again. Processes that share a breaker should share its
// Options: one with a shorter OpenTimeout cuts the others' longer open times.
//
// The breaker of gobreaker v2 for a distributed store (DistributedCircuitBreaker)
// holds a fleet-wide lock for the whole of every call and waits up to 5 s for it;
// this one shares transitions instead, so no call waits on another process.
type Breaker struct {
	s            *Store
	local        *breaker.Breaker
	link         link
	state, probe string // keys
	lease        time.Duration
	maxOpen      time.Duration // MaxOpenTimeout × (1 + OpenJitter): the longest this breaker opens

	view    atomic.Pointer[view]
	pending atomic.Bool // a local transition waits to be published
	wake    chan struct{}
	bg      background

	probeMu sync.Mutex    // one lease request at a time
	leased  atomic.Uint64 // the open generation this process holds the probe lease of
	refused atomic.Uint64 // the open generation whose lease another process holds
	// halfOpenErr refuses a call while another process probes. It is built once, so
	// refusing allocates nothing.
	halfOpenErr *policy.RejectError
}

// view is the fleet's state as last read.
type view struct {
	open  bool
	gen   uint64
	until time.Time // by this process's clock
}

// NewBreaker returns a breaker named o.Name, shared through s by every process that
// builds one of the same name, with o for the local breaker (see [breaker.New]). It
// reads the shared state once before it returns (at most Timeout) and keeps it up to
// date until [Breaker.Close].
func NewBreaker(s *Store, o breaker.Options) (*Breaker, error) {
	name := o.Name
	if s == nil {
		return nil, fmt.Errorf("%w: %s: the Store is nil", ErrInvalidOptions, name)
	}
	probeTime := orDefault(o.OpenTimeout, breaker.DefaultOpenTimeout)
	f := &Breaker{s: s, state: s.key("breaker", name), probe: s.key("breaker", name, "probe"),
		lease:   probeTime,
		maxOpen: longestOpen(o),
		wake:    make(chan struct{}, 1),
		// As the local breaker's own half-open refusal: come back once the probe has
		// had OpenTimeout to answer.
		halfOpenErr: &policy.RejectError{Policy: breaker.Kind, Name: name, Reason: breaker.ReasonHalfOpen,
			RetryAfter: probeTime, Err: breaker.ErrOpen}}
	f.link = link{s: s, name: name, kind: KindBreaker, stage: breaker.Kind}
	user := o.OnStateChange
	o.OnStateChange = func(name string, from, to breaker.State) {
		f.pending.Store(true)
		select {
		case f.wake <- struct{}{}:
		default:
		}
		if user != nil {
			user(name, from, to)
		}
	}
	local, err := breaker.New(o)
	if err != nil {
		return nil, err
	}
	f.local = local
	f.view.Store(&view{})
	f.sync()
	f.bg.start(s, f.wake, func(ticked bool) {
		if ticked {
			f.refused.Store(0) // ask for the probe lease again: its holder may be gone
		}
		f.sync()
	})
	return f, nil
}

// longestOpen returns the longest time a breaker of o stays open: MaxOpenTimeout (the
// open time grows to it while probes fail) lengthened by the whole of OpenJitter.
func longestOpen(o breaker.Options) time.Duration {
	open := orDefault(o.MaxOpenTimeout, max(breaker.DefaultMaxOpenTimeout, orDefault(o.OpenTimeout, breaker.DefaultOpenTimeout)))
	jitter := orDefault(o.OpenJitter, breaker.DefaultOpenJitter)
	if jitter < 0 || jitter > 1 {
		jitter = 0 // none, or refused by breaker.New
	}
	return open + time.Duration(math.Ceil(float64(open)*jitter))
}

// Local returns the breaker of this process, to register for inspection and
// metrics, or to hand to a shedder.
func (f *Breaker) Local() *breaker.Breaker { return f.local }

// Name returns the breaker's name.
func (f *Breaker) Name() string { return f.local.Name() }

// Placement is a breaker's.
func (f *Breaker) Placement() policy.Placement {
	return policy.Placement{Kind: breaker.Kind, Prompt: true}
}

// Bind returns the Runner that runs each call through the fleet's breaker.
func (f *Breaker) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return &runner{f: f, local: f.local.Bind(next, env)}
}

// Subscribe implements event.Source: o hears the local breaker's state changes.
func (f *Breaker) Subscribe(o event.Observer, pipeline string) { f.local.Subscribe(o, pipeline) }

// ExplainStage implements policy.StageExplainer.
func (f *Breaker) ExplainStage() policy.Stage {
	st := f.local.ExplainStage()
	st.Summary += fmt.Sprintf("; shared by the fleet on Redis (refreshed every %v; one process probes; local if Redis is out of reach for %v)",
		f.s.interval, f.s.timeout)
	return st
}

// Shared reports whether the breaker decides on the fleet's state now; false while
// Redis is out of reach.
func (f *Breaker) Shared() bool { return !f.link.Local() }

// Close stops the background refresh. The breaker still works, on its own.
func (f *Breaker) Close() error { return f.bg.stop() }

type runner struct {
	f     *Breaker
	local policy.Runner
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	f := r.f
	// Closed: nothing but this load. Open: the local breaker, which adopted the
	// fleet's open time, refuses. Half-open: one process of the fleet probes.
	if v := f.view.Load(); v.open {
		// A process whose own breaker is still open (it tripped with a later open time
		// than the fleet's) refuses by itself and leaves the probe lease to another.
		if now := time.Now(); !now.Before(v.until) {
			if _, open := f.local.OpenNow(); !open && !f.mayProbe(ctx, v.gen) {
				return f.halfOpenErr
			}
		}
	}
	return r.local.Run(ctx, fn)
}

// mayProbe reports whether this process may send probes while the fleet's breaker,
// open in generation gen, is half-open: whether it holds the probe lease or, Redis
// out of reach, decides on its own.
func (f *Breaker) mayProbe(ctx context.Context, gen uint64) bool {
	if f.link.Local() || f.leased.Load() == gen {
		return true
	}
	if f.refused.Load() == gen {
		return false
	}
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	if f.leased.Load() == gen {
		return true
	}
	if f.refused.Load() == gen {
		return false
	}
	ctx, cancel := f.s.bounded(context.WithoutCancel(ctx))
	defer cancel()
	res, err := leaseProbe.Run(ctx, f.s.rdb, []string{f.state, f.probe}, gen, f.s.id, f.lease.Milliseconds(),
		ms(f.maxOpen)).Int64Slice()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("fleet: the probe lease script answered %v", res)
	}
	if err != nil {
		f.link.result(err)
		return true // fail open: the local breaker's half-open state decides
	}
	if res[4] != 0 {
		f.link.result(f.badStateError(res[4])) // repaired: the next sync shares again
	} else {
		f.link.result(nil)
	}
	if res[0] == 1 {
		f.leased.Store(gen)
		return true
	}
	if uint64(res[2]) != gen {
		f.adopt(res[1] == 2, uint64(res[2]), min(time.Duration(res[3])*time.Millisecond, f.maxOpen)) // it moved on
	}
	if res[4] != 0 {
		return true // the state was bad: the local breaker decides until the next sync
	}
	f.refused.Store(gen)
	return false
}

// sync publishes this process's latest transition, if one waits (or Redis has just
// come back), reads the fleet's state and adopts it.
func (f *Breaker) sync() {
	publish := f.pending.Swap(false) || f.link.Local()
	want, openFor := "", time.Duration(0)
	if publish {
		now := time.Now()
		switch snap := f.local.Snapshot(now); {
		case snap.Forced: // forced open is this process's own business
		case snap.State == breaker.StateOpen:
			want, openFor = "open", snap.Until.Sub(now)
		case snap.State == breaker.StateClosed:
			want = "closed"
		}
	}
	known := f.view.Load().gen
	ctx, cancel := f.s.bounded(context.Background())
	defer cancel()
	res, err := syncBreaker.Run(ctx, f.s.rdb, []string{f.state, f.probe}, want, known, openFor.Milliseconds(),
		ms(f.maxOpen)).Int64Slice()
	if err != nil {
		f.link.result(err)
		if publish {
			f.pending.Store(true)
		}
		return
	}
	if len(res) != 4 {
		f.link.result(fmt.Errorf("fleet: the breaker script answered %v", res))
		return
	}
	if res[3] != 0 {
		f.link.result(f.badStateError(res[3])) // repaired: the next sync shares again
	} else {
		f.link.result(nil)
	}
	f.adopt(res[0] == 2, uint64(res[1]), min(time.Duration(res[2])*time.Millisecond, f.maxOpen))
}

// ms returns d in whole milliseconds, rounded up.
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// adopt makes the fleet's state this process's.
func (f *Breaker) adopt(open bool, gen uint64, left time.Duration) {
	now := time.Now()
	prev := f.view.Swap(&view{open: open, gen: gen, until: now.Add(left)})
	switch {
	case open && left > 0:
		f.local.OpenUntil(now.Add(left))
	case !open && gen != prev.gen && prev.gen != 0:
		if snap := f.local.Snapshot(now); !snap.Forced && snap.State != breaker.StateClosed {
			f.local.Reset() // another process's probe closed it
		}
	}
}
