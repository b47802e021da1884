package sim_test

import (
	"bytes"
	"crypto/sha256"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

// TestStorm_FullRuns plays the storm's default run (100 calls/s for 20 s, the
// database down 5–12 s) for each stack, twice: the summaries are byte-identical, and
// the ranking is the storm's — Backstop recovers within a second of the outage, naive
// does not recover in the run's time and sends more requests per call during it.
func TestStorm_FullRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("three 20 s runs")
	}
	runs := map[sim.Stack]sim.Summary{}
	for _, stack := range []sim.Stack{sim.Naive, sim.OwnerOnly, sim.Backstop} {
		sc := sim.Storm(stack, 1, 100, 20*time.Second)
		if v := os.Getenv("SIM_NETWORK"); v != "" {
			sc.Network.Mean, _ = time.ParseDuration(v)
		}
		start := time.Now()
		a, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start)
		if !raceEnabled || stack == sim.Backstop {
			b, _ := sim.Run(t, sc)
			if !bytes.Equal(a.JSON(), b.JSON()) {
				t.Errorf("%s: two runs of one seed differ", stack)
			}
		}
		runs[stack] = a
		t.Logf("%-10s calls %4d ok %4d (%.3f) failed %4d lost %4d db %6d db/call during outage %.2f recovery %.1fs p99 %.0fms; %d events in %v",
			stack, a.Calls, a.OK, a.OKShare, a.Failed, a.Lost, a.Requests["db"], a.Outage.PerCall, a.Outage.Recovery, a.P99, a.Events, wall)
	}
	bs, naive := runs[sim.Backstop], runs[sim.Naive]
	if r := bs.Outage.Recovery; r < 0 || r > 1 {
		t.Errorf("backstop recovered %vs after the outage; want within 1 s", r)
	}
	if bs.Lost != 0 {
		t.Errorf("backstop lost %d calls; want 0", bs.Lost)
	}
	if naive.Outage.PerCall <= runs[sim.OwnerOnly].Outage.PerCall {
		t.Errorf("naive sent %v database requests per call during the outage, owner_only %v; want more", naive.Outage.PerCall, runs[sim.OwnerOnly].Outage.PerCall)
	}
}

// The summary does not depend on how many threads run the bubble's goroutines.
func TestRun_SameSummaryWhateverGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, stack := range []sim.Stack{sim.Naive, sim.OwnerOnly, sim.Backstop} {
		var digests [][32]byte
		for _, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			d := 8 * time.Second
			if raceEnabled {
				d = 3 * time.Second
			}
			s, err := sim.Run(t, sim.Storm(stack, 1, 100, d))
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, sha256.Sum256(s.JSON()))
		}
		if digests[0] != digests[1] {
			t.Errorf("%s: GOMAXPROCS 1 and 4 gave different summaries", stack)
		}
		t.Logf("%s %x", stack, digests[0])
	}
}
