package sim

import (
	"container/heap"
	"sync"
	"testing/synctest"
	"time"

	"github.com/backstop-go/backstop/policy"
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
	at    time.Time
	seq   uint64
	index int    // in the heap; -1 once fired or stopped
	fn    func() // runs on the engine's goroutine and must not block
}

type events []*item

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *events) Push(x any) { it := x.(*item); it.index = len(*q); *q = append(*q, it) }
func (q *events) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
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
	it := &item{at: time.Now().Add(d), seq: e.seq, fn: fn}
	heap.Push(&e.q, it)
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
	heap.Remove(&e.q, it.index)
	return true
}

// loop fires events until done reports true once every goroutine is blocked.
func (e *engine) loop(done func() bool) {
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
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
		if d := time.Until(next.at); d > 0 {
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
		heap.Pop(&e.q)
		e.fired++
		e.mu.Unlock()
		next.fn()
		if e.tick != nil {
			e.tick()
		}
	}
}

// Clock returns the engine's policy.Clock: Now is the bubble's virtual time and its
// timers are events of the engine, fired in their turn.
func (e *engine) Clock() policy.Clock { return clock{e} }

type clock struct{ e *engine }

func (clock) Now() time.Time { return time.Now() }

func (c clock) NewTimer(d time.Duration) policy.Timer {
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
