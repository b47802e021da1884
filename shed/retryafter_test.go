package shed

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/policy/policytest"
)

// TestJitterSeconds_Spreads: for 1 000 rejections at each base the values cover
// [base, base+⌈base/2⌉] and no single value is told to more than 2/3 of the clients.
func TestJitterSeconds_Spreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, base := range []int64{1, 2, 4, 16} {
		counts := map[int]int{}
		for range 1000 {
			counts[jitterSeconds(base, rng.Float64())]++
		}
		hi := int(base + (base+1)/2)
		top := 0
		for v, n := range counts {
			if v < int(base) || v > hi {
				t.Errorf("jitterSeconds(base %d) = %d; want in [%d, %d]", base, v, base, hi)
			}
			top = max(top, n)
		}
		if len(counts) != hi-int(base)+1 {
			t.Errorf("base %d: %d distinct values told; want all %d of [%d, %d]: %v", base, len(counts), hi-int(base)+1, base, hi, counts)
		}
		if top*3 > 1000*2 {
			t.Errorf("base %d: one value told to %d of 1000 clients; want ≤ 2/3: %v", base, top, counts)
		}
		t.Logf("base %2ds: values %v, largest share %.0f %%", base, counts, float64(top)/10)
	}
}

func TestJitterSeconds_Ends(t *testing.T) {
	for _, tt := range []struct {
		base int64
		r    float64
		want int
	}{
		{1, 0, 1}, {1, 0.49, 1}, {1, 0.5, 2}, {1, 0.9999, 2},
		{4, 0, 4}, {4, 0.9999, 6},
		{16, 0.9999, 24},
		{3, 0.9999, 5}, // ⌈3/2⌉ = 2
	} {
		if got := jitterSeconds(tt.base, tt.r); got != tt.want {
			t.Errorf("jitterSeconds(%d, %v) = %d; want %d", tt.base, tt.r, got, tt.want)
		}
	}
}

// TestAdmit_NewcomerDoesNotOvertakeTheQueue catches the moment between a release
// freeing its slot and the hand-off to the queue: a newcomer arriving then must queue
// behind the request already waiting, not take the slot (order: FIFO while no
// standing queue exists, LIFO under one, critical first).
func TestAdmit_NewcomerDoesNotOvertakeTheQueue(t *testing.T) {
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := policy.Must(New(Options{Limit: LimitOptions{Fixed: 1}, Clock: clock}))
	ctx := context.Background()
	if _, why := s.Admit(ctx, PriorityDefault); why != ReasonNone {
		t.Fatalf("first Admit = %v; want admitted", why)
	}
	type result struct {
		p   Permit
		why Reason
	}
	b, c := make(chan result, 1), make(chan result, 1)
	go func() { p, why := s.Admit(ctx, PriorityDefault); b <- result{p, why} }()
	clock.BlockUntil(1) // b waits in the queue
	s.giveBack()        // the first request's slot frees; the hand-off has not run yet
	go func() { p, why := s.Admit(ctx, PriorityDefault); c <- result{p, why} }()
	select {
	case r := <-b:
		if r.why != ReasonNone {
			t.Fatalf("the queued request got %v; want the freed slot", r.why)
		}
		clock.BlockUntil(1) // c now waits its turn
		r.p.Release()       // and gets the slot b frees
		if rc := <-c; rc.why != ReasonNone {
			t.Fatalf("the newcomer got %v after the queued request; want admitted", rc.why)
		} else {
			rc.p.Release()
		}
	case r := <-c:
		r.p.Release()
		clock.Advance(time.Second) // let b time out
		<-b
		t.Fatal("a newcomer took the slot freed for the request waiting in the queue")
	}
}

// FuzzJitterSeconds: every Retry-After generated lies in [base, base+⌈base/2⌉] for
// any base the pressure can reach and any draw in [0, 1).
func FuzzJitterSeconds(f *testing.F) {
	f.Add(int64(1), 0.0)
	f.Add(int64(30), 0.999999)
	f.Add(int64(1<<40), 0.5)
	f.Fuzz(func(t *testing.T, base int64, r float64) {
		if base < 1 || base > 1<<40 || !(r >= 0 && r < 1) {
			t.Skip()
		}
		got := int64(jitterSeconds(base, r))
		if got < base || got > base+(base+1)/2 {
			t.Fatalf("jitterSeconds(%d, %v) = %d; want in [%d, %d]", base, r, got, base, base+(base+1)/2)
		}
	})
}

// TestRetryAfter_ALoneClientIsToldTheBase: one slot busy and one client that comes
// back when told, each time at the top of the jitter. A refusal or two in a second
// is no evidence of pressure: each Retry-After is at most 2 s (base 1 s), not the 20
// to 30 s that one refusal out of one request would read as.
func TestRetryAfter_ALoneClientIsToldTheBase(t *testing.T) {
	clock := policytest.NewClock(time.Unix(1e9, 0))
	s := policy.Must(New(Options{Limit: LimitOptions{Fixed: 1}, Queue: QueueOptions{Max: -1}, Clock: clock, Rand: pinnedRand(0.9999)}))
	held, _ := s.Admit(context.Background(), PriorityDefault)
	defer held.Release()
	for try := range 6 {
		_, why, ra := s.tryAdmit(context.Background(), PriorityDefault)
		if why != ReasonLimit {
			t.Fatalf("try %d: %v; want refused at the limit", try, why)
		}
		if ra.secs > 2 {
			t.Errorf("try %d of a lone client: Retry-After %d s; want ≤ 2 s", try, ra.secs)
		}
		clock.Advance(time.Duration(ra.secs) * time.Second)
	}
}

// TestPressure_ShareNeedsMoreThanAHandful: the refused share counts pressurePrior
// admitted requests besides those seen, so a few refusals read as little pressure and
// a busy second's hundreds as what they are.
func TestPressure_ShareNeedsMoreThanAHandful(t *testing.T) {
	for _, tt := range []struct {
		admitted, refused uint64
		want              int64
	}{
		{0, 1, 1},     // 1 / 11: 1 s
		{0, 3, 1},     // 3 / 13 = 23 %: 1 s
		{0, 10, 2},    // 10 / 20 = half: 2 s
		{0, 1000, 20}, // 1000 / 1010: 101 s, at most 20 (20 + 10 = 30 s)
		{500, 500, 2}, // 500 / 1010: 2 s
		{100, 900, 9}, // 900 / 1010 = 89 %: 9.2 s, rounded
	} {
		p := pressure{max: 30, base: 1}
		now := time.Unix(1e9, 0)
		p.current(now, 0)
		for range tt.refused {
			p.reject(now, 0)
		}
		if got := p.current(now.Add(time.Second), tt.admitted); got != tt.want {
			t.Errorf("base after %d admitted and %d refused in a second = %d s; want %d s", tt.admitted, tt.refused, got, tt.want)
		}
	}
}

// pinnedRand is a jitter.Rand whose every draw is its value.
type pinnedRand float64

func (r pinnedRand) Float64() float64 { return float64(r) }
