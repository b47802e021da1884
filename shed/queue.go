package shed

import (
	"context"
	"time"
)

// waiter is a request waiting in the queue for a slot.
type waiter struct {
	ch       chan struct{} // receives once when granted
	granted  bool          // guarded by Shedder.mu
	inflight int64         // in-flight count on admission, set when granted
}

// standingLocked reports whether a standing queue exists: requests have been waiting
// without the queue emptying for longer than interval. mu must be held.
func (s *Shedder) standingLocked(now time.Time, interval time.Duration) bool {
	return s.waiting.Load() > 0 && now.Sub(s.lastEmpty) > interval
}

// queueInterval is the queue's CoDel interval: Queue.Interval. Where that was left to
// its default and the limit is adaptive, it grows to queueIntervals baseline latencies
// of the work, at most maxQueueInterval. A queue is judged in the time of the work it
// holds; the package doc's Queue section says why.
func (s *Shedder) queueInterval() time.Duration {
	interval := s.opts.Queue.Interval
	if s.intervalAuto && s.adaptive != nil {
		interval = max(interval, min(queueIntervals*s.adaptive.baseline(), maxQueueInterval))
	}
	return interval
}

// The default CoDel interval in baseline latencies of the work, and its bound. The
// bound is half of a typical per-attempt timeout (1 s). A request held longer has
// likely been given up on by the time it is served.
const (
	queueIntervals   = 20
	maxQueueInterval = 500 * time.Millisecond
)

// wait queues a request that found no free slot, until a slot is handed to it, its
// queue timeout passes, or ctx ends.
func (s *Shedder) wait(ctx context.Context, p Priority) (Permit, Reason, refusal) {
	now := s.clock.Now()
	if dl, ok := ctx.Deadline(); ok {
		var est time.Duration
		if s.adaptive != nil {
			est = s.adaptive.baseline()
		}
		if dl.Sub(now) <= est {
			return s.refuse(ReasonDeadline, p)
		}
	}
	s.mu.Lock()
	if s.waiting.Load() >= int64(s.opts.Queue.Max) {
		s.mu.Unlock()
		return s.refuse(ReasonQueueFull, p)
	}
	interval := s.queueInterval()
	timeout := interval
	if s.standingLocked(now, interval) {
		timeout = s.opts.Queue.Target
	}
	if s.waiting.Load() == 0 {
		s.lastEmpty = now
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	class := 0
	if p > 0 {
		class = 1
	}
	s.queues[class] = append(s.queues[class], w)
	s.waiting.Add(1)
	s.dispatchLocked(now) // a slot may have freed since Admit looked
	s.mu.Unlock()

	t := s.clock.NewTimer(timeout)
	select {
	case <-w.ch:
		t.Stop()
		return s.admit(w.inflight), ReasonNone, refusal{}
	case <-t.C():
	case <-ctx.Done():
		t.Stop()
	}
	s.mu.Lock()
	if w.granted { // granted as we gave up: take the slot
		s.mu.Unlock()
		return s.admit(w.inflight), ReasonNone, refusal{}
	}
	q := s.queues[class]
	for i, x := range q {
		if x == w {
			s.queues[class] = append(q[:i], q[i+1:]...)
			break
		}
	}
	s.waiting.Add(-1)
	s.mu.Unlock()
	switch ctx.Err() {
	case nil:
		return s.refuse(ReasonQueue, p)
	case context.DeadlineExceeded:
		return s.refuse(ReasonDeadline, p)
	}
	return s.refuse(ReasonCanceled, p)
}

// dispatchLocked hands free slots to waiting requests: critical ones first, then the
// rest. It takes the newest first while a standing queue exists, and the oldest first
// otherwise. mu must be held.
func (s *Shedder) dispatchLocked(now time.Time) {
	interval := s.queueInterval()
	for s.waiting.Load() > 0 {
		n, ok := s.take(s.limit.Load())
		if !ok {
			return
		}
		class := 1
		if len(s.queues[1]) == 0 {
			class = 0
		}
		q := s.queues[class]
		var w *waiter
		if s.standingLocked(now, interval) {
			w, s.queues[class] = q[len(q)-1], q[:len(q)-1]
		} else {
			w = q[0]
			q[0] = nil
			s.queues[class] = q[1:]
		}
		w.granted, w.inflight = true, n
		w.ch <- struct{}{}
		if s.waiting.Add(-1) == 0 {
			s.lastEmpty = now
		}
	}
}
