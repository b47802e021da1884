package sim_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

// perCall plays the layered graph of n services at 40 % of its capacity for 1.5 s and
// returns the allocations and bytes allocated per call from 0.5 s on, past the
// building of the services.
func perCall(t *testing.T, n int) (allocs, bytes float64) {
	sc := sim.Layered(sim.Backstop, n, 1, sim.Load{})
	sc.Load = sim.Load{Share: 0.4, Duration: 1500 * time.Millisecond}
	var m0, m1 runtime.MemStats
	calls0 := -1
	s, err := sim.RunWith(t, sc, sim.Options{ProgressEvery: 500 * time.Millisecond,
		Progress: func(_ time.Duration, calls int) {
			if calls0 < 0 {
				runtime.ReadMemStats(&m0)
				calls0 = calls
			}
		}})
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	if calls0 < 0 || s.Calls <= calls0 || s.OKShare < 0.99 {
		t.Fatalf("%d services: %d calls, %d by 0.5 s, ok %v", n, s.Calls, calls0, s.OKShare)
	}
	c := float64(s.Calls - calls0)
	return float64(m1.Mallocs-m0.Mallocs) / c, float64(m1.TotalAlloc-m0.TotalAlloc) / c
}

// TestScale_CostPerCallDoesNotGrow plays ten times the services at the same load per
// service: a call must allocate no more, in count or bytes, in the larger graph. A
// cost that grows with the services (a map or slice over them built per call or per
// event) shows here; counts of allocations, unlike times, are the same on any machine.
func TestScale_CostPerCallDoesNotGrow(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("some 40 000 calls: a run of -short leaves them out")
	}
	defer sim.Tune()()
	a1, b1 := perCall(t, 200)
	a2, b2 := perCall(t, 2000)
	t.Logf("per call: %.1f allocations and %.0f bytes at 200 services, %.1f and %.0f at 2 000", a1, b1, a2, b2)
	if a2 > 1.05*a1 || b2 > 1.05*b1 {
		t.Errorf("a call at 2 000 services made %.1f allocations of %.0f bytes, at 200 %.1f of %.0f; want at most 5 %% more",
			a2, b2, a1, b1)
	}
}
