package sim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/sim"
)

// A custom stack's pipeline runs each hop: a retry of 3 attempts under the storm's
// probe sends 3 requests to the database, and the hops get the run's clock.
func TestRun_CustomStack(t *testing.T) {
	var hops []string
	sc := probe(sim.Naive)
	sc.Custom = map[sim.Stack]sim.ClientFunc{"three": func(h sim.Hop) (sim.Client, error) {
		hops = append(hops, h.From+"→"+h.To)
		if h.Clock == nil || h.Rand == nil {
			return sim.Client{}, errors.New("no clock or rand")
		}
		return sim.Client{Pipeline: policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: h.Clock, Rand: h.Rand}))))}, nil
	}}
	sc.Services[2].Stack = "three" // data → db
	s, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	// edge and api are naive (4 × 4 requests to data), data retries 3 times each.
	if got, want := s.Requests["db"], 4*4*3; got != want {
		t.Errorf("db requests = %d, want %d", got, want)
	}
	if len(hops) != 1 || hops[0] != "data→db" {
		t.Errorf("ClientFunc called for %v, want [data→db]", hops)
	}
	sc.Custom["three"] = func(sim.Hop) (sim.Client, error) { return sim.Client{}, errors.New("no route") }
	if _, err := sim.Run(t, sc); err == nil {
		t.Error("Run with a ClientFunc that fails: no error")
	}
}

// Load.Share is a share of the capacity: 0.5 of the storm's database (160/s) for 10 s
// is some 800 calls; progress is reported every virtual second, in order.
func TestRunWith_ShareAndProgress(t *testing.T) {
	sc := sim.Storm(sim.Backstop, 1, 1, 10*time.Second)
	sc.Load = sim.Load{Share: 0.5, Duration: 10 * time.Second}
	var at []time.Duration
	last := -1
	s, err := sim.RunWith(t, sc, sim.Options{Progress: func(v time.Duration, calls int) {
		if calls < last {
			t.Errorf("progress: %d calls after %d", calls, last)
		}
		last = calls
		at = append(at, v)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls < 700 || s.Calls > 900 {
		t.Errorf("%d calls at half of 160/s for 10 s, want about 800", s.Calls)
	}
	if len(at) < 10 || at[0] < time.Second || at[0] >= 2*time.Second {
		t.Errorf("progress at %v, want once a second from 1 s", at)
	}
	if until := sc.Until(); until != 13*time.Second {
		t.Errorf("Until() = %v, want 13s", until)
	}
}
