package breaker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrDuplicate is matched by Registry.Add's error for a name already registered.
var ErrDuplicate = errors.New("breaker: duplicate name")

// Registry lists breakers by name for inspection (breakerhttp.Handler) and
// metrics. There is no global registry. Create one and add the breakers you want
// listed.
//
// A Registry is safe for concurrent use. Its zero value is an empty registry.
type Registry struct {
	mu sync.RWMutex // guards m
	m  map[string]*Breaker
}

// Add registers breakers. It refuses nil and a name already present. It then adds
// none of the breakers.
func (r *Registry) Add(bs ...*Breaker) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, b := range bs {
		if b == nil {
			return fmt.Errorf("breaker: Registry.Add: breaker %d is nil", i)
		}
		if _, ok := r.m[b.name]; ok {
			return fmt.Errorf("%w: %q is already registered", ErrDuplicate, b.name)
		}
		for _, c := range bs[:i] {
			if c.name == b.name {
				return fmt.Errorf("%w: %q is given twice", ErrDuplicate, b.name)
			}
		}
	}
	if r.m == nil {
		r.m = make(map[string]*Breaker, len(bs))
	}
	for _, b := range bs {
		r.m[b.name] = b
	}
	return nil
}

// Get returns the breaker named name, or nil.
func (r *Registry) Get(name string) *Breaker {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[name]
}

// List returns the registered breakers sorted by name.
func (r *Registry) List() []*Breaker {
	r.mu.RLock()
	bs := make([]*Breaker, 0, len(r.m))
	for _, b := range r.m {
		bs = append(bs, b)
	}
	r.mu.RUnlock()
	slices.SortFunc(bs, func(a, b *Breaker) int { return strings.Compare(a.name, b.name) })
	return bs
}

// Snapshot is a breaker's state at one moment, as breakerhttp.Handler serves it.
type Snapshot struct {
	Name   string `json:"name"`
	State  State  `json:"-"`
	Forced bool   `json:"forced"`
	Counts Counts `json:"counts"`
	// OpenedAt is when the breaker last opened; zero if it never did.
	OpenedAt time.Time `json:"-"`
	// Until is when an open breaker lets probes through. It is zero unless open
	// (and not forced).
	Until time.Time `json:"-"`
	// RetryAfter is the RetryAfter of the breaker's refusal now. When open, it is
	// Until − now, rounded up to the millisecond. When forced open, it is
	// MaxOpenTimeout. When half-open, it is OpenTimeout: the time its probes are
	// given. It is 0 when closed.
	RetryAfter time.Duration `json:"-"`
	// Last is the last transition; zero if none. An open breaker whose time is up
	// reads half-open before gobreaker moves it on the next call. Last then says
	// open → half-open at Until.
	Last Transition `json:"-"`
	// Tripped are the counts that last tripped the breaker open. Package gobreaker
	// clears Counts when it opens. Tripped is zero if it never tripped by itself.
	Tripped Counts `json:"-"`
	// SlowStart is the share of calls the breaker lets through now, while it ramps
	// its traffic up after closing (Options.SlowStart). It is 0 otherwise.
	// RetryAfter is then what its refusals say.
	SlowStart float64 `json:"-"`
}

// Snapshot returns the breaker's state as of now.
func (b *Breaker) Snapshot(now time.Time) Snapshot {
	counts := b.Counts()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{
		Name:     b.name,
		State:    b.stateLocked(now),
		Forced:   b.forced.Load(),
		Counts:   counts,
		OpenedAt: b.openedAt,
		Last:     b.last,
	}
	if t := b.tripped.Load(); t != nil {
		s.Tripped = *t
	}
	switch {
	case s.Forced:
		s.RetryAfter = b.forcedErr.RetryAfter
	case s.State == StateOpen:
		s.Until = b.until
		s.RetryAfter = retryAfter(s.Until, now)
	case s.State == StateClosed && b.rampFrom.Load() != 0:
		if elapsed := now.Sub(b.epoch) - time.Duration(b.rampFrom.Load()-1); elapsed < b.slowStart {
			s.SlowStart = SlowStartMinShare + (1-SlowStartMinShare)*float64(max(elapsed, 0))/float64(b.slowStart)
			s.RetryAfter = b.rampErr.RetryAfter
		}
	case s.State == StateHalfOpen:
		s.RetryAfter = b.halfOpenErr.RetryAfter
		if b.state == StateOpen {
			s.Last = Transition{From: StateOpen, To: StateHalfOpen, At: b.until}
		}
	}
	return s
}
