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
