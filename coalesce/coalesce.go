package coalesce

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/maypok86/otter/v2"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/internal/stripe"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	DefaultMaxEntries        = 10_000
	DefaultTTL               = time.Minute
	DefaultJitter            = 0.1 // TTLs uniform in [0.9·TTL, 1.1·TTL]
	DefaultStaleWhileRefresh = 10 * time.Second
	DefaultStaleIfError      = 5 * time.Minute
	DefaultNegativeTTL       = time.Second
	DefaultMaxNegativeTTL    = 30 * time.Second
	// DefaultLoadTimeout bounds an origin call that nothing else bounds. That is a
	// cache with no Pipeline. Or it is one whose Pipeline has neither a deadline
	// nor a per-attempt timeout (policy.Explanation.WorstCase is 0).
	DefaultLoadTimeout = 10 * time.Second
)

// PanicSource is the Source of the event.Panic a Cache reports.
const PanicSource = "coalesce"

// errGoexit is the error of a load whose Load called runtime.Goexit.
var errGoexit = errors.New("coalesce: Load called runtime.Goexit")

// ErrInvalidOptions is matched by New's errors for bad Options.
var ErrInvalidOptions = errors.New("coalesce: invalid options")

// Options configure a [Cache]. Only Load is required.
type Options[K comparable, V any] struct {
	// Load fetches a key's value from the origin. Required.
	Load func(ctx context.Context, key K) (V, error)
	// Pipeline runs every origin call; nil means none.
	Pipeline *policy.Pipeline
	// LoadTimeout bounds each origin call. 0 means DefaultLoadTimeout (10 s) when
	// nothing else bounds the call. That is so with no Pipeline, or with a Pipeline
	// with neither a deadline nor a per-attempt timeout. Otherwise, 0 means no
	// bound of the cache's own. Negative means none at all. A load is shared, so it
	// runs detached from its callers' contexts. This is what ends a load of an
	// origin that hangs.
	LoadTimeout time.Duration
	// Observer hears the cache's own events: an event.Panic (Source PanicSource)
	// for each panic recovered in a load or refresh. Nil means none.
	Observer event.Observer
	// MaxEntries bounds the entries kept. Under otter's eviction, the least likely
	// to be used again go first. 0 means DefaultMaxEntries.
	MaxEntries int
	// TTL is how long a value is fresh, before Jitter; 0 means DefaultTTL (1 min).
	TTL time.Duration
	// Jitter spreads TTLs uniformly over [TTL·(1−Jitter), TTL·(1+Jitter)]. 0 means
	// DefaultJitter (0.1). Negative means none. Above 1 is refused.
	Jitter float64
	// StaleWhileRefresh is how long after its TTL a value is still served, at
	// once, while one background refresh runs. 0 means DefaultStaleWhileRefresh
	// (10 s). Negative means none.
	StaleWhileRefresh time.Duration
	// StaleIfError is how long after its TTL the last good value is served when
	// the origin fails. 0 means DefaultStaleIfError (5 min). Negative means never.
	StaleIfError time.Duration
	// NegativeTTL is how long a failed load is remembered (and returned) before
	// the origin is asked again. It doubles with each failure in a row, up to
	// MaxNegativeTTL. 0 means DefaultNegativeTTL (1 s) and DefaultMaxNegativeTTL
	// (30 s). A negative NegativeTTL means failures are not remembered.
	NegativeTTL, MaxNegativeTTL time.Duration
	// XFetchBeta, if > 0, refreshes a fresh value early. It uses the probability
	// of Vattani, Chierichetti and Lowenstein's XFetch ("Optimal Probabilistic
	// Cache Stampede Prevention", VLDB 2015). A Get at time now refreshes when
	// now − δ·β·ln(rand) ≥ expiry. Here δ is how long the last load took. 1 is the
	// paper's default; 0 turns it off.
	XFetchBeta float64
	// Clock and Rand are the seams for tests; nil means clock.System() and
	// jitter.System().
	Clock clock.Clock
	Rand  jitter.Rand
}

// Stats count what a Cache did.
type Stats struct {
	Hits, Misses, CoalescedWaits, Refreshes, StaleServed, LoadErrors uint64
	Panics                                                           uint64 // loads that panicked (counted in LoadErrors too)
}

// Cache is a coalescing cache. It is safe for concurrent use. Build it with [New].
// Call Close to wait for the loads under way when done. Keys are compared with ==,
// as map keys are. Two keys share a load and an entry only if they are equal.
type Cache[K comparable, V any] struct {
	o     Options[K, V]
	clock clock.Clock
	rand  jitter.Rand
	// Entries keep their times as durations since epoch. When the clock is the
	// system clock (system), they are read on the monotonic clock alone. That is
	// half the cost of time.Now on every hit.
	epoch   time.Time
	system  bool
	timeout time.Duration // bounds each origin call; 0 for none
	store   *otter.Cache[K, *entry[V]]
	flights sync.Map       // K → *flight[V]: the load under way for each key
	bg      sync.WaitGroup // loads under way, for Close

	_                                                 [64]byte // keeps hits off the lines of the fields above
	hits                                              striped  // the hot path: no shared cache line
	misses, waits, refreshes, stale, loadErrs, panics atomic.Uint64
}

// flight is one load under way, shared by every caller of its key meanwhile.
type flight[V any] struct {
	done chan struct{} // closed when val and err are set
	val  V
	err  error
}

// striped is a counter spread over cache lines. Thus concurrent hits on many cores
// do not contend on one word. A goroutine keeps to one cell (internal/stripe), so
// a cell's line mostly stays in one core's cache.
type striped struct {
	cells [16]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

func (s *striped) Add(n uint64) { s.cells[stripe.Index(15)].n.Add(n) }

func (s *striped) Load() (sum uint64) {
	for i := range s.cells {
		sum += s.cells[i].n.Load()
	}
	return sum
}

// entry is one key's state. It is replaced, never changed, once stored.
type entry[V any] struct {
	value    V
	ok       bool          // value is a good value
	err      error         // the last load's error, if it failed
	fresh    time.Duration // the value is fresh until then (since the cache's epoch)
	errUntil time.Duration // err is remembered until then (since the cache's epoch)
	failures int           // loads failed in a row
	took     time.Duration // how long the last good load took, for XFetch
}

// New returns a Cache, or an error matching ErrInvalidOptions that names the field.
func New[K comparable, V any](o Options[K, V]) (*Cache[K, V], error) {
	bad := check.Invalid[*Cache[K, V]](ErrInvalidOptions)
	switch {
	case o.Load == nil:
		return bad("Load is nil; want the function that fetches a value from the origin")
	case o.MaxEntries < 0:
		return bad("MaxEntries is %d; want ≥ 1, or 0 for the default %d", o.MaxEntries, DefaultMaxEntries)
	case o.TTL < 0:
		return bad("TTL is %v; want > 0, or 0 for the default %v", o.TTL, DefaultTTL)
	case o.Jitter > 1 || math.IsNaN(o.Jitter):
		return bad("Jitter is %v; want a fraction in [0, 1], or negative for none", o.Jitter)
	case o.XFetchBeta < 0 || math.IsNaN(o.XFetchBeta) || math.IsInf(o.XFetchBeta, 0):
		return bad("XFetchBeta is %v; want ≥ 0", o.XFetchBeta)
	case o.MaxNegativeTTL < 0:
		return bad("MaxNegativeTTL is %v; want ≥ 0", o.MaxNegativeTTL)
	}
	def := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	def(&o.TTL, DefaultTTL)
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	}
	def(&o.StaleWhileRefresh, DefaultStaleWhileRefresh)
	def(&o.StaleIfError, DefaultStaleIfError)
	if o.NegativeTTL == 0 && o.MaxNegativeTTL == 0 {
		o.MaxNegativeTTL = DefaultMaxNegativeTTL
	}
	def(&o.NegativeTTL, DefaultNegativeTTL)
	o.MaxNegativeTTL = max(o.MaxNegativeTTL, o.NegativeTTL)
	store, err := otter.New(&otter.Options[K, *entry[V]]{MaximumSize: o.MaxEntries})
	if err != nil {
		return bad("%v", err)
	}
	timeout := o.LoadTimeout
	if timeout == 0 && (o.Pipeline == nil || o.Pipeline.Explain().WorstCase == 0) {
		timeout = DefaultLoadTimeout
	}
	if o.Pipeline == nil {
		o.Pipeline = policy.NoProtection() // nil means none, said in the Options
	}
	c := clock.Or(o.Clock)
	return &Cache[K, V]{o: o, clock: c, rand: jitter.Or(o.Rand), timeout: max(timeout, 0), store: store,
		epoch: c.Now(), system: clock.IsSystem(c)}, nil
}

// Stats returns the counts so far.
func (c *Cache[K, V]) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), CoalescedWaits: c.waits.Load(),
		Refreshes: c.refreshes.Load(), StaleServed: c.stale.Load(), LoadErrors: c.loadErrs.Load(), Panics: c.panics.Load()}
}

// Len returns how many entries are held, after otter's pending evictions have run.
// Those are applied in batches.
func (c *Cache[K, V]) Len() int {
	c.store.CleanUp()
	return c.store.EstimatedSize()
}

// Close waits for the loads under way, background refreshes included.
func (c *Cache[K, V]) Close() { c.bg.Wait() }

// Get returns key's value. It comes from the cache while fresh, or stale within
// its windows. Else it comes from one origin call, shared by every caller that asks
// meanwhile. A caller whose ctx ends stops waiting with ctx's error. It leaves
// nothing behind. The shared call goes on for the others, bounded by LoadTimeout.
// A panic in Load reaches every caller of that load as a *policy.PanicError. The
// package documentation says more.
func (c *Cache[K, V]) Get(ctx context.Context, key K) (V, error) {
	now := c.now()
	e, found := c.store.GetIfPresent(key)
	failed := found && e.err != nil && now < e.errUntil // the last load failed: the origin is not asked again yet
	if found && e.ok {
		switch {
		case now < e.fresh:
			c.hits.Add(1)
			if c.o.XFetchBeta != 0 && !failed && c.early(now, e) {
				c.refresh(ctx, key)
			}
			return e.value, nil
		case now < check.AddSat(e.fresh, c.o.StaleWhileRefresh):
			c.stale.Add(1)
			if !failed {
				c.refresh(ctx, key)
			}
			return e.value, nil
		}
	}
	if failed {
		if e.ok && now < check.AddSat(e.fresh, c.o.StaleIfError) {
			c.stale.Add(1)
			return e.value, nil
		}
		var zero V
		return zero, e.err
	}
	c.misses.Add(1)
	return c.wait(ctx, key)
}

// now is the time on the cache's clock as a duration since its epoch.
func (c *Cache[K, V]) now() time.Duration {
	if c.system {
		return time.Since(c.epoch) // the monotonic clock alone
	}
	return c.clock.Now().Sub(c.epoch)
}

// early reports whether XFetch says to refresh a fresh entry now.
func (c *Cache[K, V]) early(now time.Duration, e *entry[V]) bool {
	if c.o.XFetchBeta == 0 || e.took <= 0 {
		return false
	}
	r := c.rand.Float64()
	if r <= 0 {
		return false
	}
	gap := time.Duration(-float64(e.took) * c.o.XFetchBeta * math.Log(r))
	return check.AddSat(now, gap) >= e.fresh
}

// wait joins (or starts) the key's shared load, and waits for it or for ctx. A
// caller that stops waiting leaves nothing behind. The load's goroutine publishes
// its result to whoever is still waiting.
func (c *Cache[K, V]) wait(ctx context.Context, key K) (V, error) {
	f, joined := c.join(ctx, key)
	if joined {
		c.waits.Add(1)
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// refresh starts one background load of key, unless one is under way. The load
// outlives ctx, and Close waits for it.
func (c *Cache[K, V]) refresh(ctx context.Context, key K) { c.join(ctx, key) }

// join returns the key's load under way. Or it starts one and returns it with
// joined false. A new load is detached from ctx, but keeps its values.
func (c *Cache[K, V]) join(ctx context.Context, key K) (f *flight[V], joined bool) {
	shared := key == key // a key holding a NaN equals no key, itself included: nothing to share
	if got, ok := c.flights.Load(key); ok && shared {
		return got.(*flight[V]), true
	}
	f = &flight[V]{done: make(chan struct{})}
	if shared {
		if got, loaded := c.flights.LoadOrStore(key, f); loaded {
			return got.(*flight[V]), true
		}
	}
	c.bg.Add(1)
	go c.run(context.WithoutCancel(ctx), key, f)
	return f, false
}

// run is the goroutine of one load. It loads key, publishes the result to f's
// waiters, and retires f. Nothing the load runs can end the process. A panic
// becomes the load's error, and so does a runtime.Goexit.
func (c *Cache[K, V]) run(ctx context.Context, key K, f *flight[V]) {
	defer c.bg.Done()
	f.err = errGoexit // replaced unless Load calls runtime.Goexit
	defer func() {
		if r := recover(); r != nil { // the cache's own bookkeeping: never expected
			var zero V
			f.val, f.err = zero, policy.NewPanicError(r)
		}
		c.flights.CompareAndDelete(key, f)
		close(f.done)
	}()
	f.val, f.err = c.load(ctx, key)
}

// load calls the origin through the pipeline, and stores what it got. It runs once
// per key at a time, detached from the callers' contexts.
func (c *Cache[K, V]) load(ctx context.Context, key K) (V, error) {
	start := c.now()
	if e, ok := c.store.GetIfPresent(key); ok && e.ok && start < e.fresh && !c.early(start, e) {
		return e.value, nil // a load that finished just before this one began
	}
	c.refreshes.Add(1)
	v, err := c.call(ctx, key)
	now := c.now()
	prev, _ := c.store.GetIfPresent(key)
	keep := key == key // a key holding a NaN could never be found again: it is not stored
	if err == nil {
		if keep {
			c.store.Set(key, &entry[V]{value: v, ok: true, fresh: check.AddSat(now, c.ttl()), took: now - start})
		}
		return v, nil
	}
	c.loadErrs.Add(1)
	e := &entry[V]{err: err, failures: 1}
	if prev != nil {
		e.value, e.ok, e.fresh, e.took = prev.value, prev.ok, prev.fresh, prev.took
		e.failures = prev.failures + 1
	}
	neg := c.o.NegativeTTL
	for i := 1; i < e.failures && neg < c.o.MaxNegativeTTL; i++ {
		neg *= 2
	}
	e.errUntil = check.AddSat(now, min(neg, c.o.MaxNegativeTTL))
	if keep {
		c.store.Set(key, e)
	}
	if e.ok && now < check.AddSat(e.fresh, c.o.StaleIfError) {
		c.stale.Add(1)
		return e.value, nil // stale if error (an open breaker included)
	}
	var zero V
	return zero, err
}

// call runs Load through the pipeline, within the cache's timeout. A panic in Load
// is recovered, reported and returned as a *policy.PanicError. So is one in a stage
// or observer of the pipeline. Recovered inside the pipeline, a panic in Load is a
// failed attempt to its stages. A breaker counts it; a retry does not retry it.
func (c *Cache[K, V]) call(ctx context.Context, key K) (v V, err error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			var zero V
			v, err = zero, c.panicked(ctx, r)
		}
	}()
	err = c.o.Pipeline.Do(ctx, func(ctx context.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = c.panicked(ctx, r)
			}
		}()
		got, err := c.o.Load(ctx, key)
		if err == nil {
			v = got
		}
		return err
	})
	return v, err
}

// panicked turns a recovered panic into the load's error and reports it.
func (c *Cache[K, V]) panicked(ctx context.Context, r any) *policy.PanicError {
	pe := policy.NewPanicError(r)
	c.panics.Add(1)
	if c.o.Observer != nil {
		c.o.Observer.Observe(event.Event{Kind: event.Panic, Pipeline: c.o.Pipeline.Name(), Source: PanicSource,
			Time: c.clock.Now(), Err: pe, Context: ctx})
	}
	return pe
}

// ttl returns the TTL with its jitter.
func (c *Cache[K, V]) ttl() time.Duration {
	if c.o.Jitter == 0 {
		return c.o.TTL
	}
	f := 1 + c.o.Jitter*(2*c.rand.Float64()-1)
	return time.Duration(float64(c.o.TTL) * f)
}

// CacheCounts returns the counters of [Stats] in order, for package metrics: hits,
// misses, coalesced waits, refreshes, stale values served, load errors.
func (c *Cache[K, V]) CacheCounts() (hits, misses, coalesced, refreshes, stale, loadErrors uint64) {
	s := c.Stats()
	return s.Hits, s.Misses, s.CoalescedWaits, s.Refreshes, s.StaleServed, s.LoadErrors
}
