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
	nearCapacity(t, "testdata/checkout-noisy-db.yaml", []float64{0.85, 0.95}, 0.97)
}

// TestDatabaseAtCapacity: the checkout path over the storm's database (4 workers of
// 25 ms) at 97 % of its capacity, down from 5 s to 12 s — what the storm's loopback
// database becomes when busy goroutines beside it stretch its queries (the storm's
// -contend). The latency of admitted work sits between 1.2 and 1.5 times the baseline
// there, which asks the shedder's limit for a probe every few windows; a probe that
// does not hold makes the next wait twice as long. In every seed 1–5 Backstop answers
// at least 99 % of the calls the owner rule alone answers (99.5 % the worst; 98.0 %
// with a probe every fifth window) and recovers within a second.
func TestDatabaseAtCapacity(t *testing.T) {
	nearCapacity(t, "testdata/checkout.yaml", []float64{0.97}, 0.99)
}

// nearCapacity plays the scenario file at each share of its capacity for seeds 1–5
// and checks that Backstop answers at least want of the calls the owner rule alone
// answers, and recovers within a second of the outage.
func nearCapacity(t *testing.T, file string, shares []float64, want float64) {
	t.Helper()
	if raceEnabled {
		t.Skip("simulated runs, slow under the race detector: run without it")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, share := range shares {
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
			if float64(b.OK) < want*float64(o.OK) {
				t.Errorf("%.0f %% load, seed %d: Backstop answered %d calls ok, %.1f %% of the owner rule's %d; want ≥ %.0f %%",
					100*share, seed, b.OK, 100*float64(b.OK)/float64(o.OK), o.OK, 100*want)
			}
			if r := b.Outage.Recovery; r < 0 || r > 1 {
				t.Errorf("%.0f %% load, seed %d: Backstop recovered %v s after the outage; want within 1 s", 100*share, seed, r)
			}
		}
	}
}
