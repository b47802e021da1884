package sim_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

// probe is the storm's probe: one user action with the database down, no user
// timeout and no per-request timeout on the naive loop.
func probe(stack sim.Stack) sim.Scenario {
	sc := sim.Storm(stack, 1, 1, time.Second)
	sc.Name = "probe"
	sc.Services[3].Faults = []sim.Fault{{Kind: sim.Down, From: 0, To: time.Hour}}
	sc.Load = sim.Load{Burst: 1, UserTimeout: -1}
	sc.Tuning.NoHopTimeout = true
	return sc
}

func TestStormProbe_DatabaseRequestsPerUserAction(t *testing.T) {
	for stack, want := range map[sim.Stack]int{sim.Naive: 64, sim.OwnerOnly: 4, sim.Backstop: 4} {
		s, err := sim.Run(t, probe(stack))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Requests["db"]; got != want {
			t.Errorf("%s: %d database requests for one user action, want %d", stack, got, want)
		}
		if s.Calls != 1 || s.Failed != 1 {
			t.Errorf("%s: %d calls, %d failed; want 1 failed call", stack, s.Calls, s.Failed)
		}
	}
}

func TestRun_SameSeedSameSummary(t *testing.T) {
	sc := sim.Storm(sim.Backstop, 7, 100, 4*time.Second)
	a, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.JSON(), b.JSON()) {
		t.Fatalf("two runs of seed 7 differ:\n%s\n%s", a.JSON(), b.JSON())
	}
	t.Logf("calls %d ok %d events %d", a.Calls, a.OK, a.Events)
}
