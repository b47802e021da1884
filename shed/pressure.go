package shed

import (
	"math"
	"sync"
	"time"
)

// pressurePrior is how many admitted requests the refused share assumes besides those
// counted. So 1 refusal alone reads as 9 %, 10 of 10 as half, and 1 000 of 1 000 as
// 99 %.
const pressurePrior = 10

// pressure estimates the Retry-After base from the share of requests refused.
type pressure struct {
	max int64 // MaxRetryAfter, whole seconds

	mu       sync.Mutex // guards the fields below
	base     int64      // seconds, ≥ 1 (1 from New; rollLocked keeps it so)
	since    time.Time  // start of the span being counted; zero: none
	admitted uint64     // the shedder's admitted count at since
	refused  uint64     // refusals since
}

// reject notes a refusal at now and returns the base in force. admitted is the
// shedder's admitted count.
func (p *pressure) reject(now time.Time, admitted uint64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rollLocked(now, admitted)
	p.refused++
	return p.base
}

// rollLocked closes the span being counted once it is a second old, and sets the base
// from its refused share. A span with no refusals starts nothing. mu must be held.
func (p *pressure) rollLocked(now time.Time, admitted uint64) {
	if p.since.IsZero() {
		p.since, p.admitted, p.refused = now, admitted, 0
		return
	}
	age := now.Sub(p.since)
	if age < time.Second {
		return
	}
	if age >= 2*time.Second || p.refused == 0 {
		p.base = 1 // a calm second (or more) since the refusals counted
	} else {
		// A handful of requests says little: a lone client refused once must not read
		// as all of the traffic refused. The share counts pressurePrior requests
		// admitted besides those seen, which a busy second's hundreds outweigh.
		share := float64(p.refused) / (float64(p.refused+since(admitted, p.admitted)) + pressurePrior)
		p.base = baseFor(share, p.max)
	}
	p.since, p.admitted, p.refused = now, admitted, 0
}

// baseFor returns 1 / (1 − share) seconds, rounded, at most the largest base whose jitter
// stays within ceiling: b + ⌈b/2⌉ ≤ ceiling.
func baseFor(share float64, ceiling int64) int64 {
	top := max(1, (2*ceiling)/3)
	for top > 1 && top+(top+1)/2 > ceiling {
		top--
	}
	if share >= 1 {
		return top
	}
	return min(top, max(1, int64(math.Round(1/(1-share)))))
}

func (p *pressure) current(now time.Time, admitted uint64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rollLocked(now, admitted)
	return p.base
}
