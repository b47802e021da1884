package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	// DefaultPrefix begins every key the fleet policies keep in Redis.
	DefaultPrefix = "backstop:"
	// DefaultTimeout bounds every Redis call a fleet policy makes, on a call's path or
	// in the background: 50 ms, well above a loopback or same-zone round trip (under
	// 1 ms) and well below what a caller notices. A call never waits on Redis longer.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultSyncInterval is how often a fleet policy brings its shared state up to
	// date in the background: 100 ms, so a breaker opened in one process is open in
	// every other within about that, and a fleet of 50 makes 500 small requests a
	// second per policy.
	DefaultSyncInterval = 100 * time.Millisecond
)

// ErrInvalidOptions is matched by the constructors' errors for bad options.
var ErrInvalidOptions = errors.New("fleet: invalid options")

// Options configure a [Store].
type Options struct {
	// Prefix begins every key; "" means DefaultPrefix. Fleets sharing one Redis for
	// different services set their own. It may not hold '{' or '}': the hash tag that
	// follows it keeps each policy's keys in one Redis Cluster slot and spreads the
	// policies over the cluster, and a tag in the prefix would put every policy in one
	// slot.
	Prefix string
	// Timeout bounds every Redis call; 0 means DefaultTimeout. A call that takes
	// longer counts as a failure of the store: the policy decides locally (fail open).
	Timeout time.Duration
	// SyncInterval is how often policies refresh their shared state; 0 means
	// DefaultSyncInterval.
	SyncInterval time.Duration
	// ID names this process in the fleet (the budget counts the fleet's members by
	// it); "" means hostname-pid-random.
	ID string
	// Observer hears every fleet policy's [event.Fleet]: when it falls back to
	// local state and when it returns to the shared one. The event's Source is the
	// policy's name and its Reason the policy's kind ([KindBreaker], [KindBudget],
	// [KindQuota]). Its Stage is the Placement.Kind of the stage the policy serves:
	// "breaker", "budget", or "shed" for a quota. nil means none.
	Observer event.Observer
}

// Store is the Redis the fleet policies of a process share, with the bounds every
// call to it keeps. One per process (per Redis) is enough; it is safe for concurrent
// use. Build it with [New].
type Store struct {
	rdb      redis.UniversalClient
	prefix   string
	timeout  time.Duration
	interval time.Duration
	id       string
	obs      event.Observer
	manual   bool // tests: no background loops; they sync when the test says
}

// New returns a Store on rdb. The client must have ContextTimeoutEnabled set, so that
// Timeout bounds every call (go-redis otherwise waits out its own read timeout, 3 s
// by default, on a Redis that stopped answering); New refuses a client without it.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	bad := func(format string, args ...any) (*Store, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case rdb == nil:
		return bad("the redis client is nil")
	case o.Timeout < 0:
		return bad("Timeout is %v; want > 0, or 0 for the default %v", o.Timeout, DefaultTimeout)
	case strings.ContainsAny(o.Prefix, "{}"):
		return bad("Prefix %q holds a brace; Redis Cluster would hash every policy's keys by it, into one slot", o.Prefix)
	case o.SyncInterval < 0:
		return bad("SyncInterval is %v; want > 0, or 0 for the default %v", o.SyncInterval, DefaultSyncInterval)
	}
	if !contextTimeouts(rdb) {
		return bad("the redis client's ContextTimeoutEnabled is false; set it so that Timeout (%v) bounds every call", orDefault(o.Timeout, DefaultTimeout))
	}
	s := &Store{rdb: rdb, prefix: o.Prefix, timeout: orDefault(o.Timeout, DefaultTimeout),
		interval: orDefault(o.SyncInterval, DefaultSyncInterval), id: o.ID, obs: o.Observer}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.id == "" {
		host, _ := os.Hostname()
		s.id = fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
	}
	return s, nil
}

// ID returns the name of this process in the fleet.
func (s *Store) ID() string { return s.id }

func contextTimeouts(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true // another implementation: its own business
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// lost tells a cluster client that a call failed, so that it reads the cluster's
// slot map again. go-redis reads it again on a MOVED or ASK reply, but not when a
// primary is gone: without this, calls would go to the dead primary's address until
// ClusterStateReloadInterval (60 s by default) after its replica took over. The
// client reads the map in the background, once at a time, at most five times a
// second.
func (s *Store) lost() {
	if c, ok := s.rdb.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(context.Background())
	}
}

// bounded returns ctx limited to the store's Timeout.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// key returns the key of a policy's state; the braces keep a policy's keys in one
// Redis Cluster slot, as its scripts need.
func (s *Store) key(kind, name string, parts ...string) string {
	k := s.prefix + "{" + kind + ":" + name + "}"
	for _, p := range parts {
		k += ":" + p
	}
	return k
}

// The kinds of fleet policy, as a event.Fleet's Reason gives them: a breaker
// and a budget may share a name (the dependency's), and their events stay apart.
const (
	KindBreaker = breaker.Kind // a [Breaker]
	KindBudget  = budget.Kind  // a [Ratio] or a [TokenBucket]
	KindQuota   = "quota"      // a [Quota], which serves a shedder
)

// link is whether one policy decides on shared state or, its store out of reach, on
// its own; it reports each change once as a event.Fleet.
type link struct {
	s     *Store
	name  string
	kind  string // KindBreaker, KindBudget or KindQuota: the events' Reason
	stage string // the Placement.Kind of the stage the policy serves: the events' Stage
	local atomic.Bool
	last  atomic.Pointer[error] // the error that made it local
}

// lastErr returns the error that last made the policy decide locally, or nil.
func (l *link) lastErr() error {
	if p := l.last.Load(); p != nil {
		return *p
	}
	return nil
}

// result records how the last call to the store went and reports a change.
func (l *link) result(err error) {
	if err != nil && errors.Is(err, redis.Nil) {
		err = nil
	}
	down := err != nil
	if down {
		l.last.Store(&err)
		if !errors.Is(err, ErrBadState) {
			l.s.lost()
		}
	}
	if l.local.Swap(down) == down {
		return
	}
	if l.s.obs == nil {
		return
	}
	e := event.Event{Kind: event.Fleet, Stage: l.stage, Source: l.name, Reason: l.kind, Time: time.Now(),
		From: event.FleetShared, To: event.FleetLocal, Err: err}
	if !down {
		e.From, e.To = event.FleetLocal, event.FleetShared
	}
	l.s.obs.Observe(e)
}

// Local reports whether the policy decides on its own now, its store out of reach.
func (l *link) Local() bool { return l.local.Load() }

// background runs a policy's sync every SyncInterval, and at once when woken, until
// stop.
type background struct {
	done    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
}

// start runs sync in the background; ticked says whether the interval, rather than
// wake, brought it. A Store of the tests' (manual) runs nothing.
func (b *background) start(s *Store, wake <-chan struct{}, sync func(ticked bool)) {
	if s.manual {
		return
	}
	b.done = make(chan struct{})
	b.stopped.Add(1)
	sync = contained(s, sync)
	go func() {
		defer b.stopped.Done()
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				sync(true)
			case <-wake:
				sync(false)
			}
		}
	}()
}

// contained runs sync so that a panic in it — in an observer it calls, say — is
// reported as a event.Panic (Source "fleet", Err a *policy.PanicError) and the
// background goes on with the next sync, instead of killing the process.
func contained(s *Store, sync func(ticked bool)) func(bool) {
	return func(ticked bool) {
		defer func() {
			v := recover()
			if v == nil || s.obs == nil {
				return
			}
			defer func() { _ = recover() }() // an observer that panics again is not heard twice
			s.obs.Observe(event.Event{Kind: event.Panic, Source: "fleet", Time: time.Now(), Err: policy.NewPanicError(v)})
		}()
		sync(ticked)
	}
}

// stop ends the background sync and waits for it.
func (b *background) stop() error {
	b.once.Do(func() {
		if b.done != nil {
			close(b.done)
		}
	})
	b.stopped.Wait()
	return nil
}
