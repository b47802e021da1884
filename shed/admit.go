package shed

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/callpath"
)

// Permit is admitted work. Call Release exactly once when the work is done.
type Permit struct {
	s *Shedder
	// start is when the work was admitted, on the shedder's clock since its epoch:
	// a duration, so that tryAdmit returns its results in registers.
	start time.Duration
	timed bool // the adaptive limit takes this request's latency
	// inflight is the work in flight as this work was admitted, itself included.
	inflight int64
	hold     *hold // its Pauser, once asked for
}

// Admit asks for a slot for work of priority p. It returns a Permit and ReasonNone,
// or a zero Permit and why the work was refused. Work that cannot be admitted at once
// may wait in the queue (never sheddable work, never past ctx's deadline).
func (s *Shedder) Admit(ctx context.Context, p Priority) (Permit, Reason) {
	permit, why, ra := s.tryAdmit(ctx, p)
	if why != ReasonNone {
		s.report(ctx, "", why, p, ra.secs)
	}
	return permit, why
}

// tryAdmit is Admit that also returns, for a refusal, when it asks the request back.
func (s *Shedder) tryAdmit(ctx context.Context, p Priority) (Permit, Reason, refusal) {
	if g := s.adaptive; g != nil && g.cpu != nil && g.cpu.share.Load() != 0 && g.cpu.refuses(p, s.rand.Float64()) {
		now := s.clock.Now()
		g.refreshCPU(now)
		return s.refuseAt(now, ReasonCPU, p)
	}
	limit := s.limit.Load()
	room := limit // how many in flight this priority may join
	if p < 0 {
		// At least one: an idle server admits a retry. Shedding retries first is for
		// when there is pressure.
		room = max(1, int64(float64(limit)*s.sheddable))
	}
	if s.waiting.Load() > 0 {
		// Requests wait for slots: a newcomer must not take a slot freed for them.
		if p < 0 {
			return s.refuse(ReasonPriority, p)
		}
		if s.adaptive != nil {
			s.adaptive.full.Add(1)
		}
		if s.opts.Queue.Max < 0 {
			return s.refuse(ReasonLimit, p)
		}
		return s.wait(ctx, p)
	}
	for { // take, inline
		w := s.slots.Load()
		n := inflightOf(w)
		if n >= room {
			break
		}
		if s.slots.CompareAndSwap(w, w+admitOne) {
			if (w+admitOne)>>32%foldEvery == 0 {
				s.foldAdmitted()
			}
			return s.admit(n + 1), ReasonNone, refusal{}
		}
	}
	if s.adaptive != nil {
		s.adaptive.full.Add(1) // the limit bound this request: evidence for growing it
	}
	if p < 0 {
		return s.refuse(ReasonPriority, p)
	}
	if s.opts.Queue.Max < 0 {
		return s.refuse(ReasonLimit, p)
	}
	return s.wait(ctx, p)
}

// admit returns the permit of work that took a slot (and was counted admitted with
// it), inflight in flight with it.
func (s *Shedder) admit(inflight int64) Permit {
	p := Permit{s: s, inflight: inflight}
	if s.adaptive != nil && s.adaptive.admitted(inflight, s.rand) { // only the adaptive limit needs latencies
		p.start, p.timed = s.clock.Now().Sub(s.epoch), true
	}
	return p
}

// Release returns the permit's slot of work that succeeded and, for an adaptive
// limit, records its latency. Releasing a zero Permit does nothing.
func (p Permit) Release() { p.release(true) }

// ReleaseFailed returns the permit's slot of work that failed. Its latency is not
// recorded. A fast failure (a handler whose own dependency is down) says nothing about
// this server's load. Learning from it would make every success afterwards look slow.
// Releasing a zero Permit does nothing.
func (p Permit) ReleaseFailed() { p.release(false) }

func (p Permit) release(ok bool) {
	s := p.s
	if s == nil {
		return
	}
	if p.timed && ok {
		now := s.clock.Now()
		if l, changed := s.adaptive.sample(now, now.Sub(s.epoch)-p.start, s.admittedNow(), s.refusedAtLimit(), s.inFlight()-1); changed {
			s.limit.Store(l)
		}
	}
	if s.waiting.Load() > 0 {
		// Free the slot and hand it on under the lock. Newcomers see requests waiting
		// and queue behind them rather than take it (see tryAdmit).
		s.mu.Lock()
		s.giveBack()
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
		return
	}
	s.giveBack()
	if s.waiting.Load() > 0 { // a request queued just now, after looking at a full limit
		s.mu.Lock()
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
	}
}

// pause gives a slot back for admitted work that waits. A request waiting in the queue
// may take it. The slot is taken again by resume.
func (s *Shedder) pause() {
	s.giveBack()
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
	}
}

func (s *Shedder) resume() { s.slots.Add(1) }

// hold is one admitted request's hold on its slot, as the callpath.Pauser of its
// context. Pauses nest: the first gives the slot back, and the last Resume takes it
// again. So a request paused twice at once gives back one slot. That happens when a
// proxied call reads its body, or when it makes calls in parallel.
type hold struct {
	s     *Shedder
	depth atomic.Int32
}

func (h *hold) Pause() {
	if h.depth.Add(1) == 1 {
		h.s.pause()
	}
}

func (h *hold) Resume() {
	if h.depth.Add(-1) == 0 {
		h.s.resume()
	}
}

// Pauser returns the callpath.Pauser of the permit's work. Put it in the work's context
// (callpath.WithPauser), and the work gives its slot back while it waits: a retry's
// backoff, or a call through policyhttp's transport. It takes the slot again after,
// whatever the limit, since the work was admitted. Pauses nest.
//
// Work that paused is timed in full. Its latency, waits included, is what its callers
// see. It is also the latency a breaker's refusal adds to its Retry-After. The zero
// Permit's Pauser does nothing.
func (p *Permit) Pauser() callpath.Pauser {
	if p.s == nil {
		return nopPauser{}
	}
	if p.hold == nil {
		p.hold = &hold{s: p.s}
	}
	return p.hold
}

type nopPauser struct{}

func (nopPauser) Pause()  {}
func (nopPauser) Resume() {}
