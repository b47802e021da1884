package sim_test

import (
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

func TestProfileHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	sc := sim.Storm(sim.Backstop, 1, 100, 100*time.Second)
	sc.Services[3].Faults = nil
	start := time.Now()
	s, _ := sim.Run(t, sc)
	t.Logf("%d calls in %v: %.0f calls/s, %d events", s.Calls, time.Since(start), float64(s.Calls)/time.Since(start).Seconds(), s.Events)
}
