package shed

import (
	"testing"

	"github.com/backstop-go/backstop/jitter"
)

// TestGradient_SystemRandTimesOneInStride guards the draw from the runtime's generator
// that a shedder on jitter.System() makes: it times one request in stride, as the
// draw through jitter.Rand does.
func TestGradient_SystemRandTimesOneInStride(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    *gradient
		r    jitter.Rand
	}{
		{"system", &gradient{systemRand: true}, jitter.System()},
		{"seeded", &gradient{}, jitter.Seeded(1, 2)},
	} {
		tc.g.stride.Store(8)
		const n = 80_000
		timed := 0
		for range n {
			if tc.g.admitted(1, tc.r) {
				timed++
			}
		}
		// 10 000 expected; the standard deviation is ~94, so ±2 000 is over 20 of them.
		if timed < 8_000 || timed > 12_000 {
			t.Errorf("%s: admitted timed %d of %d at stride 8; want about 10 000", tc.name, timed, n)
		}
	}
	g := &gradient{systemRand: true}
	g.stride.Store(1)
	if !g.admitted(1, jitter.System()) {
		t.Error("admitted at stride 1 = false; want every request timed")
	}
}

// TestSlots_AdmittedCountsPastTheWrap guards the packing of flight.go: the work
// admitted stays exact in 64 bits while its 32 bits in slots wrap, and the work in
// flight is unaffected.
func TestSlots_AdmittedCountsPastTheWrap(t *testing.T) {
	s := &Shedder{}
	const high = 1<<32 - 3            // 3 admissions before the high bits wrap
	const total = 5<<32 + high        // as if they had wrapped 5 times already
	s.slots.Store(uint64(high) << 32) // none in flight
	s.admittedAt.Store(&admittedBase{total: total, high: high})
	for i := range 10 {
		n, ok := s.take(100)
		if !ok || n != 1 {
			t.Fatalf("take %d = %d, %v; want 1 in flight, admitted", i, n, ok)
		}
		s.giveBack()
	}
	if got := s.Admitted(); got != total+10 {
		t.Errorf("Admitted() = %d; want %d (10 more, across the wrap)", got, uint64(total+10))
	}
	if s.admittedAt.Load().total == total {
		t.Error("admittedAt was not folded as the high bits wrapped")
	}
	if got := s.InFlight(); got != 0 {
		t.Errorf("InFlight() = %d; want 0", got)
	}
	// A full limit refuses, and leaves both counts alone.
	s.take(1)
	if n, ok := s.take(1); ok || n != 1 {
		t.Errorf("take(room 1) with 1 in flight = %d, %v; want 1, refused", n, ok)
	}
	if got := s.Admitted(); got != total+11 {
		t.Errorf("Admitted() = %d; want %d", got, uint64(total+11))
	}
}
