package sim

import (
	"sync"
	"testing/synctest"
	"time"

	"github.com/backstop-go/backstop/clock"
)

// engine is the discrete-event scheduler of a simulated run. It must run inside a
// testing/synctest bubble (see [Run]): the bubble's clock is the virtual time, and
// synctest.Wait tells the engine when every simulated goroutine is blocked.
//
// The engine keeps a queue of events ordered by (time, order of scheduling). It fires
// them one at a time and, after each, waits until every goroutine of the bubble is
// blocked again before it fires the next: what one event sets off settles before the
// next begins, so a run is a function of its scenario and seed. Between events the
// engine sleeps on the bubble's clock to the next event's time, which lets the runtime
// timers of the bubble (context deadlines, gobreaker's time.Now) see the same virtual
// time; a goroutine those timers wake that schedules an earlier event wakes the engine.
type engine struct {
	mu    sync.Mutex
	q     events
	seq   uint64
	kick  chan struct{} // a scheduled event may be earlier than the engine's sleep
	fired uint64
	tick  func() // if not nil, called on the engine's goroutine after each event
}

type item struct {
	at    int64 // virtual time, in nanoseconds of the bubble's clock
	seq   uint64
	index int    // in the heap; -1 once fired or stopped
	fn    func() // runs on the engine's goroutine and must not block
}

// events is a binary min-heap of items by (at, seq): typed, so that ordering costs
// no interface calls.
type events []*item

func (q events) less(i, j int) bool {
	a, b := q[i], q[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q events) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q events) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down moves q[i] down and reports whether it moved.
func (q events) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		c := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			c = r
		}
		if !q.less(c, i) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > start
}

func (q *events) push(it *item) {
	it.index = len(*q)
	*q = append(*q, it)
	q.up(it.index)
}

// remove takes out the item at i and returns it.
func (q *events) remove(i int) *item {
	old := *q
	n := len(old) - 1
	if i != n {
		old.swap(i, n)
	}
	it := old[n]
	old[n] = nil
	*q = old[:n]
	if i != n && !q.down(i) {
		q.up(i)
	}
	it.index = -1
	return it
}

func newEngine() *engine { return &engine{kick: make(chan struct{}, 1)} }

// After schedules fn to run on the engine's goroutine once d of virtual time has
// passed; fn must not block. It is safe for concurrent use.
func (e *engine) After(d time.Duration, fn func()) { e.schedule(max(d, 0), fn) }

func (e *engine) schedule(d time.Duration, fn func()) *item {
	e.mu.Lock()
	e.seq++
	it := &item{at: time.Now().Add(d).UnixNano(), seq: e.seq, fn: fn}
	e.q.push(it)
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
	return it
}

// cancel removes it from the queue and reports whether it was still there.
func (e *engine) cancel(it *item) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if it.index < 0 {
		return false
	}
	e.q.remove(it.index)
	return true
}

// loop fires events until done reports true once every goroutine is blocked.
func (e *engine) loop(done func() bool) {
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
	// The sweeper is a function timer: a channel timer is in the runtime's heap only
	// while a goroutine waits on its channel.
	sweeper := time.AfterFunc(time.Hour, func() {})
	defer sweeper.Stop()
	var swept uint64
	for {
		synctest.Wait()
		select { // every other goroutine is blocked: no one schedules now
		case <-e.kick:
		default:
		}
		if done() {
			return
		}
		e.mu.Lock()
		if len(e.q) == 0 {
			e.mu.Unlock()
			// Only runtime timers (a context's deadline) can wake anyone now.
			<-e.kick
			continue
		}
		next := e.q[0]
		if d := time.Duration(next.at - time.Now().UnixNano()); d > 0 {
			e.mu.Unlock()
			sleep.Reset(d)
			select {
			case <-sleep.C:
			case <-e.kick:
				if !sleep.Stop() {
					<-sleep.C
				}
			}
			continue
		}
		e.q.remove(0)
		e.fired++
		// The sweep goes through the whole heap, whose size follows the calls in
		// flight, as the events queued do: sweeping after events in proportion to the
		// queue keeps its cost per event the same at any scale.
		every := max(sweepEvery, sweepPerQueued*uint64(len(e.q)))
		e.mu.Unlock()
		next.fn()
		if e.tick != nil {
			e.tick()
		}
		if e.fired-swept >= every {
			swept = e.fired
			// Due in a nanosecond, earlier than it was: the bubble's timer heap is
			// swept the next time time moves (see sweepEvery). The sweeper's
			// function does nothing and touches nothing of the run.
			sweeper.Reset(time.Hour) // in the heap again if it fired
			sweeper.Reset(time.Nanosecond)
		}
	}
}

// sweepEvery is the fewest events the engine fires between sweeps of the bubble's
// timer heap; past sweepEvery/sweepPerQueued events queued, it fires sweepPerQueued
// per event queued. A stopped runtime timer (every context deadline that did not run out)
// stays in a bubble's heap, holding its context and every context above it, until the
// time it was set for: the runtime drops stopped timers early only from a processor's
// own heap, never from a bubble's. At the 1 000-service scale that is some 170 000
// stopped timers, and a live heap of about 70 MB (18 MB swept) that every collection
// marks. But the runtime does sweep a heap of stopped timers
// when one of its timers has been moved to an earlier time and that time comes, so
// the engine moves one of its own, the sweeper, every sweepEvery events. What the
// run computes does not change: the sweep only drops timers that will never fire.
// A sweep goes through the whole heap, the running timers too: at the 1 000-service
// scale, sweeping every 1 024 events costs about 1 % of the run's CPU and leaves some
// 5 MB of stopped timers' contexts between sweeps.
// Some 540 events are queued at the 1 000-service scale, and 5 300 at 10 000, where
// the heaps are ten times as large: a sweep every 1 024 events took ten times the
// share of the run's CPU there.
const (
	sweepEvery     = 1024
	sweepPerQueued = 2
)

// Clock returns the engine's clock.Clock: Now is the bubble's virtual time and its
// timers are events of the engine, fired in their turn.
func (e *engine) Clock() clock.Clock { return engineClock{e} }

type engineClock struct{ e *engine }

func (engineClock) Now() time.Time { return time.Now() }

func (c engineClock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{e: c.e, c: make(chan time.Time, 1)}
	t.it = c.e.schedule(max(d, 0), func() { t.c <- time.Now() })
	return t
}

type timer struct {
	e  *engine
	it *item
	c  chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.c }
func (t *timer) Stop() bool          { return t.e.cancel(t.it) }
