package sim_test

import (
	"os"
	"testing"

	"github.com/backstop-go/backstop/sim"
)

// TestNoisyDatabaseNearCapacity: the checkout path over a database of 4 workers whose
// query times are exponential (mean 25 ms), at 85 % and 95 % of its capacity, down
// from 5 s to 12 s. Near its capacity such a database keeps a queue that drains and
// re-forms every few requests, and the backlog of the outage takes a while to drain:
// Backstop's shedder in front of it must not refuse from that queue what the workers
// have time for — the refused come back as retries. In every seed 1–5 Backstop
// answers at least 97 % of the calls the owner rule alone answers (97.6 % and 97.7 %
// the worst; with a 100 ms queue interval whatever the work, 96.3 % and 92.4 %) and
// recovers within a second.
func TestNoisyDatabaseNearCapacity(t *testing.T) {
	if raceEnabled {
		t.Skip("twenty simulated runs, slow under the race detector: run without it")
	}
	data, err := os.ReadFile("testdata/checkout-noisy-db.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, share := range []float64{0.85, 0.95} {
		for seed := uint64(1); seed <= 5; seed++ {
			ok := map[sim.Stack]sim.Summary{}
			for _, stack := range []sim.Stack{sim.OwnerOnly, sim.Backstop} {
				sc, err := sim.ParseScenario(data, nil)
				if err != nil {
					t.Fatal(err)
				}
				sc.Load.Share, sc.Seed, sc.Stack = share, seed, stack
				if ok[stack], err = sim.Run(t, sc); err != nil {
					t.Fatal(err)
				}
			}
			b, o := ok[sim.Backstop], ok[sim.OwnerOnly]
			if float64(b.OK) < 0.97*float64(o.OK) {
				t.Errorf("%.0f %% load, seed %d: Backstop answered %d calls ok, %.1f %% of the owner rule's %d; want ≥ 97 %%",
					100*share, seed, b.OK, 100*float64(b.OK)/float64(o.OK), o.OK)
			}
			if r := b.Outage.Recovery; r < 0 || r > 1 {
				t.Errorf("%.0f %% load, seed %d: Backstop recovered %v s after the outage; want within 1 s", 100*share, seed, r)
			}
		}
	}
}
