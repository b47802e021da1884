package shed

import (
	"errors"
	"time"

	"github.com/backstop-go/backstop/policy"
)

// ErrShed is matched by the error of work the Shedder refused as a policy. That
// error is a *policy.RejectError, so it matches policy.ErrRejected too.
var ErrShed = errors.New("shed: rejected")

// refusal is when a refused request is told to come back. It holds the Retry-After in
// whole seconds (secs, jittered) and the pressure's base it was drawn from.
// [Shedder.briefMillis] scales the base too, so the two headers of one refusal say the
// same thing.
type refusal struct {
	secs int
	base int64
}

// refuse is reject with the pressure-adapted Retry-After.
func (s *Shedder) refuse(r Reason, p Priority) (Permit, Reason, refusal) {
	return s.refuseAt(s.clock.Now(), r, p)
}

// refuseAt is refuse at now. The refusal is counted in the pressure, and its
// Retry-After drawn from the base that results, in one reading.
func (s *Shedder) refuseAt(now time.Time, r Reason, p Priority) (Permit, Reason, refusal) {
	base := s.pressure.reject(now, s.admittedNow())
	return Permit{}, s.reject(r), refusal{secs: s.draw(base), base: base}
}

// refusedAtLimit counts the refusals of work that found no slot.
func (s *Shedder) refusedAtLimit() uint64 {
	return s.rejected[ReasonLimit].Load() + s.rejected[ReasonPriority].Load() + s.rejected[ReasonQueueFull].Load() +
		s.rejected[ReasonQueue].Load() + s.rejected[ReasonDeadline].Load()
}

// reject counts a refusal for r and returns r.
func (s *Shedder) reject(r Reason) Reason {
	s.rejected[r].Add(1)
	return r
}

// refusal returns the error of work refused for r with a Retry-After of secs. Its
// RetryAfter is what the middleware would have sent (see [Shedder.RetryAfter]). The
// error is shared: for the usual Retry-Afters it is made once.
func (s *Shedder) refusal(r Reason, secs int) *policy.RejectError {
	cache := s.refusals[r]
	if secs < len(cache) {
		if e := cache[secs].Load(); e != nil {
			return e
		}
	}
	e := &policy.RejectError{Policy: Kind, Name: s.name, Reason: r.String(),
		RetryAfter: time.Duration(secs) * time.Second, Err: ErrShed}
	if secs < len(cache) {
		cache[secs].Store(e) // a racing refusal may store its twin: either will do
	}
	return e
}

// RetryAfter returns the Retry-After to send with a rejection now, in whole seconds. It
// is the shedder's estimate of when a client refused now will be admitted, with upward
// jitter.
//
// The estimate comes from the share ρ of requests refused over the last second. It
// counts admitted requests and refusals for want of a slot. An open breaker's refusals
// carry the breaker's own open time instead, and a quota's the client's next token. A
// client that comes back every T is admitted with probability 1 − ρ each time. So it
// waits T / (1 − ρ) on average. The base is that for T = 1 s, rounded to whole seconds.
// It is 1 s while under a third of the requests are refused, 2 s at half and 10 s at
// 90 %. It falls back to 1 s after a second without refusals.
//
// The value sent is drawn uniformly from [base, base + ⌈base/2⌉]. It never exceeds
// Refusal.MaxRetryAfter. At base 1 s, half the clients are told 1 and half 2. At 16 s,
// the values 16…24 are equally likely. Whole seconds are what RFC 9110's delay-seconds
// can say. Clients that arrive over time then return spread over the whole range.
func (s *Shedder) RetryAfter() time.Duration {
	return time.Duration(s.draw(s.pressure.current(s.clock.Now(), s.admittedNow()))) * time.Second
}

// draw returns a Retry-After in whole seconds, as the header sends it, for the
// pressure's base: jittered, never above MaxRetryAfter.
func (s *Shedder) draw(base int64) int {
	return min(jitterSeconds(base, s.rand.Float64()), int(s.pressure.max))
}

// jitterSeconds draws a whole number of seconds uniformly from [base, base+⌈base/2⌉]
// with r in [0, 1).
func jitterSeconds(base int64, r float64) int {
	span := (base + 1) / 2 // ⌈base/2⌉
	extra := int64(r * float64(span+1))
	return int(base + min(extra, span))
}
