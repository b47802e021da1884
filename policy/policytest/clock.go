package policytest

import (
	"sort"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"
)

// Clock is a fake [clock.Clock] for tests: time moves only when the test says so.
//
// In manual mode (the default), timers fire when [Clock.Advance] or [Clock.Set]
// moves the time past them. [Clock.BlockUntil] lets a test wait for a goroutine to
// start a timer before it advances. In auto mode ([Clock.AutoAdvance]), every new
// timer fires at once and moves the clock forward by its duration. Thus a
// single-goroutine retry loop runs to the end without help. [Clock.Waits] tells
// what it slept.
//
// A Clock is safe for concurrent use. Its zero value is not usable; use [NewClock].
type Clock struct {
	mu     sync.Mutex // guards all fields
	cond   *sync.Cond
	now    time.Time
	auto   bool
	timers []*timer
	waits  []time.Duration
}

// NewClock returns a manual Clock that reads start.
func NewClock(start time.Time) *Clock {
	c := &Clock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// AutoAdvance switches auto mode on or off and returns c.
func (c *Clock) AutoAdvance(on bool) *Clock {
	c.mu.Lock()
	c.auto = on
	c.mu.Unlock()
	return c
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the fake time reaches Now()+d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.cond.Broadcast() // for BlockUntilStarted
	t := &timer{c: c, ch: make(chan time.Time, 1), when: c.now.Add(d)}
	switch {
	case c.auto:
		if d > 0 {
			c.now = t.when
		}
		t.fire(c.now)
	case d <= 0:
		t.fire(c.now)
	default:
		c.timers = append(c.timers, t)
		c.cond.Broadcast()
	}
	return t
}

// Advance moves the time forward by d and fires every timer due, earliest first.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the time to t (never backward) and fires every timer due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

func (c *Clock) setLocked(t time.Time) {
	if t.Before(c.now) {
		return
	}
	c.now = t
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].when.Before(c.timers[j].when) })
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.when.After(t) {
			tm.fire(tm.when)
			continue
		}
		kept = append(kept, tm)
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	c.cond.Broadcast()
}

// Pending returns the number of timers started and not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until at least n timers are pending.
func (c *Clock) BlockUntil(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

// BlockUntilStarted waits until at least n timers have been started since the
// clock was made, fired and stopped ones included. A test uses it to know a timer
// was replaced, not merely that one is pending.
func (c *Clock) BlockUntilStarted(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.waits) < n {
		c.cond.Wait()
	}
}

// Waits returns the duration of every timer started so far, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type timer struct {
	c     *Clock
	ch    chan time.Time
	when  time.Time
	fired bool // guarded by c.mu
}

func (t *timer) C() <-chan time.Time { return t.ch }

// fire is called with c.mu held.
func (t *timer) fire(now time.Time) {
	t.fired = true
	t.ch <- now
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	t.fired = true // a stopped timer never fires
	t.c.cond.Broadcast()
	return true
}
