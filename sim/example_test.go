package sim_test

import (
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

// stackRecovers is a user's own test: the storm's stack, at 100 calls/s, answers 95 %
// of its calls again within 1 s of the database's 7 s outage, and loses none.
func stackRecovers(t *testing.T) {
	sc := sim.Storm(sim.Backstop, 1, 100, 20*time.Second) // database down 5–12 s
	s, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Outage.Recovery; r < 0 || r > 1 {
		t.Errorf("recovered %v s after the outage; want within 1 s", r)
	}
	if s.Lost != 0 {
		t.Errorf("%d calls lost", s.Lost)
	}
}

// Run needs the test's *testing.T (it runs the scenario in a testing/synctest
// bubble), so this example shows the test a user writes — stackRecovers, above — and
// TestExampleRun runs it.
func ExampleRun() {
	// func TestCheckoutRecovers(t *testing.T) { stackRecovers(t) }
	_ = stackRecovers
}

func TestExampleRun(t *testing.T) { stackRecovers(t) }
