package sim_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

var alwaysDown = sim.Fault{Kind: sim.Down, From: 0, To: time.Hour}

// oneAction is a single user action with no user timeout.
var oneAction = sim.Load{Burst: 1, UserTimeout: -1}

func TestChain_NaiveRetriesMultiplyPerHopBackstopsDoNot(t *testing.T) {
	for hops := 1; hops <= 3; hops++ {
		for stack, want := range map[sim.Stack]int{sim.Naive: int(math.Pow(4, float64(hops))), sim.OwnerOnly: 4, sim.Backstop: 4} {
			sc := sim.Chain(stack, hops, 1, oneAction, alwaysDown)
			sc.Tuning.NoHopTimeout = true
			s, err := sim.Run(t, sc)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Requests["db"]; got != want {
				t.Errorf("%d hops, %s: %d database requests, want %d", hops, stack, got, want)
			}
		}
	}
}

// An erroring service's Retry-After spaces Backstop's attempts: within the 2.5 s
// overall deadline, attempts at 0 and 1 s and no third, which would start at 2 s
// with less than its 1 s per-attempt timeout left (retry.Options.MinAttemptTime);
// the naive loop ignores the Retry-After and makes its 4 attempts in 350 ms.
func TestFault_ErroringWithRetryAfter(t *testing.T) {
	erroring := sim.Fault{Kind: sim.Erroring, From: 0, To: time.Hour, Rate: 1, RetryAfter: time.Second}
	for stack, want := range map[sim.Stack]int{sim.Naive: 4, sim.OwnerOnly: 2, sim.Backstop: 2} {
		s, err := sim.Run(t, sim.Chain(stack, 1, 1, oneAction, erroring))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Requests["db"]; got != want {
			t.Errorf("%s: %d requests to an erroring database, want %d", stack, got, want)
		}
		if s.Failed != 1 {
			t.Errorf("%s: %d failed calls, want 1", stack, s.Failed)
		}
	}
}

// A bounded queue answers 503 beyond it: 10 calls at once on 1 worker and a queue
// of 2 give 3 answers; the rest are refused at once.
func TestService_QueueBound(t *testing.T) {
	sc := sim.Scenario{Stack: sim.Naive, Seed: 1,
		Services: []sim.Service{{Name: "db", Workers: 1, Work: sim.Dist{Mean: 100 * time.Millisecond}, Queue: 2}},
		Load:     sim.Load{Burst: 10}}
	s, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.OK != 3 || s.Failed != 7 {
		t.Errorf("ok %d failed %d; want 3 and 7", s.OK, s.Failed)
	}
	// The third waits two service times before its own: 300 ms in virtual time.
	if s.P99 != 300 {
		t.Errorf("slowest answer %v ms; want 300", s.P99)
	}
	if s.Virtual != 0.3 {
		t.Errorf("the run took %v s of virtual time; want 0.3", s.Virtual)
	}
}

// A slow fault multiplies the service time and fades out over its Recover time:
// 5 × 100 ms in the fault, 3 × halfway through the recovery, 1 × after it.
func TestFault_SlowRecovering(t *testing.T) {
	slow := sim.Fault{Kind: sim.Slow, From: 0, To: time.Second, Recover: time.Second, Factor: 5}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{0, 500}, {1500 * time.Millisecond, 300}, {2 * time.Second, 100}} {
		sc := sim.Scenario{Stack: sim.Naive,
			Services: []sim.Service{{Name: "db", Workers: 1, Work: sim.Dist{Mean: 100 * time.Millisecond}, Faults: []sim.Fault{slow}}},
			Load:     sim.Load{Burst: 1, At: c.at}}
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if s.P50 != c.want {
			t.Errorf("%v into the fault: %v ms, want %v", c.at, s.P50, c.want)
		}
	}
}

func TestRun_SummaryFileIsTheSameForTheSameSeed(t *testing.T) {
	sc := sim.Storm(sim.Naive, 3, 80, 4*time.Second)
	dir := t.TempDir()
	for _, name := range []string{"a.json", "b.json"} {
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteFile(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.json"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.json"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("summary.json differs between two runs of one seed (%d and %d bytes)", len(a), len(b))
	}
	sc.Seed = 4
	c, _ := sim.Run(t, sc)
	if bytes.Equal(a, c.JSON()) {
		t.Error("seeds 3 and 4 gave the same summary")
	}
}

func TestRunSeeds_Spread(t *testing.T) {
	runs, sp, err := sim.RunSeeds(t, sim.Storm(sim.Backstop, 0, 100, 4*time.Second), []uint64{1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if sp.Runs != 5 || len(runs) != 5 {
		t.Fatalf("%d runs", sp.Runs)
	}
	lo, hi := 1.0, 0.0
	for _, r := range runs {
		lo, hi = min(lo, r.OKShare), max(hi, r.OKShare)
	}
	if sp.OKShare.Worst != lo || sp.OKShare.Median < lo || sp.OKShare.Median > hi {
		t.Errorf("ok share spread %+v over runs from %v to %v", sp.OKShare, lo, hi)
	}
	if sp.Recovery == nil || sp.PerCall == nil {
		t.Fatal("no outage figures")
	}
	t.Logf("ok share median %.3f worst %.3f; recovery median %vs worst %vs; db/call median %v worst %v",
		sp.OKShare.Median, sp.OKShare.Worst, sp.Recovery.Median, sp.Recovery.Worst, sp.PerCall.Median, sp.PerCall.Worst)
}

func TestValidate_NamesTheField(t *testing.T) {
	good := func() sim.Scenario { return sim.Storm(sim.Backstop, 1, 100, time.Second) }
	for field, mutate := range map[string]func(*sim.Scenario){
		"Stack":                      func(s *sim.Scenario) { s.Stack = "retry-harder" },
		"Services":                   func(s *sim.Scenario) { s.Services = nil },
		"Services[1].Name":           func(s *sim.Scenario) { s.Services[1].Name = "edge" },
		"Services[3].Work.Mean":      func(s *sim.Scenario) { s.Services[3].Work.Mean = 0 },
		"Services[3].Workers":        func(s *sim.Scenario) { s.Services[3].Workers = -1 },
		"Services[2].Calls[0]":       func(s *sim.Scenario) { s.Services[2].Calls = []string{"nowhere"} },
		"Services[0].Calls":          func(s *sim.Scenario) { s.Services[3].Calls = []string{"edge"} },
		"Services[3].Faults[0].To":   func(s *sim.Scenario) { s.Services[3].Faults[0].To = 0 },
		"Services[3].Faults[0].Kind": func(s *sim.Scenario) { s.Services[3].Faults[0].Kind = "flaky" },
		"Services[0].Stack":          func(s *sim.Scenario) { s.Services[0].Stack = "x" },
		"Load.Rate":                  func(s *sim.Scenario) { s.Load.Rate = 0 },
		"Load.Burst":                 func(s *sim.Scenario) { s.Load.Burst = -1 },
		"Load.Users":                 func(s *sim.Scenario) { s.Load.Users = 3 },
		"Load.Think.Mean":            func(s *sim.Scenario) { s.Load = sim.Load{Users: 3, Duration: time.Second} },
		"Load.At":                    func(s *sim.Scenario) { s.Load = sim.Load{Burst: 1, At: -1} },
		"Entries[0]":                 func(s *sim.Scenario) { s.Entries = []string{"nowhere"} },
		"Bucket":                     func(s *sim.Scenario) { s.Bucket = -1 },
	} {
		sc := good()
		mutate(&sc)
		err := sc.Validate()
		if !errors.Is(err, sim.ErrInvalidScenario) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: got %v", field, err)
		}
		if _, rerr := sim.Run(t, sc); rerr == nil {
			t.Errorf("%s: Run accepted it", field)
		}
	}
	sc := good()
	if err := sc.Validate(); err != nil {
		t.Errorf("the storm: %v", err)
	}
}

// Closed-loop users: each calls, thinks 100 ms and calls again. A call takes 50 ms
// unqueued, so a user makes at most 7 calls in a second (starting within its first
// think time) and at least 5 (a cycle is at most 50 ms queued + 50 + 100).
func TestLoad_ClosedLoopUsers(t *testing.T) {
	sc := sim.Scenario{Stack: sim.Naive, Seed: 1,
		Services: []sim.Service{{Name: "db", Workers: 1, Work: sim.Dist{Mean: 50 * time.Millisecond}}},
		Load:     sim.Load{Users: 2, Think: sim.Dist{Mean: 100 * time.Millisecond}, Duration: time.Second}}
	s, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls < 10 || s.Calls > 14 || s.OK != s.Calls {
		t.Errorf("%d calls, %d ok; want 10–14, all ok", s.Calls, s.OK)
	}
	if s.P99 > 100 {
		t.Errorf("slowest call %v ms; two users on one worker wait at most one other call", s.P99)
	}
}

// A service that goes down runs no work: of three calls at once on one worker of
// 100 ms, down from 50 ms on, the one running finishes; the two waiting for the worker
// fail when they reach it, at 100 ms, rather than being served during the outage.
func TestFault_DownRunsNothingQueued(t *testing.T) {
	sc := sim.Scenario{Stack: sim.Naive, Seed: 1, Load: sim.Load{Burst: 3},
		Services: []sim.Service{{Name: "svc", Workers: 1, Work: sim.Dist{Mean: 100 * time.Millisecond},
			Faults: []sim.Fault{{Kind: sim.Down, From: 50 * time.Millisecond, To: time.Hour}}}}}
	s, err := sim.Run(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.OK != 1 || s.Failed != 2 || s.P99 != 100 {
		t.Errorf("%d ok, %d failed, slowest %v ms; want 1 ok, 2 failed, all answered by 100 ms", s.OK, s.Failed, s.P99)
	}
}

// A service calls its dependencies one after another and stops at the first that
// fails: with "a" down, "b" is never asked.
func TestService_FanOutInOrder(t *testing.T) {
	for _, c := range []struct {
		faults []sim.Fault
		a, b   int
	}{{nil, 1, 1}, {[]sim.Fault{alwaysDown}, 4, 0}} {
		sc := sim.Scenario{Stack: sim.Naive, Seed: 1, Load: oneAction, Tuning: sim.Tuning{NoHopTimeout: true},
			Services: []sim.Service{{Name: "api", Calls: []string{"a", "b"}},
				{Name: "a", Faults: c.faults}, {Name: "b"}}}
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if s.Requests["a"] != c.a || s.Requests["b"] != c.b {
			t.Errorf("faults %v: a %d b %d requests; want %d and %d", c.faults, s.Requests["a"], s.Requests["b"], c.a, c.b)
		}
	}
}

// A latency-bound service (no worker limit) answers 10 calls at once in one work
// time; a capacity-bound one with 2 workers takes five.
func TestService_LatencyBoundAndCapacityBound(t *testing.T) {
	for workers, want := range map[int]float64{0: 100, 2: 500} {
		sc := sim.Scenario{Stack: sim.Naive, Seed: 1, Load: sim.Load{Burst: 10},
			Services: []sim.Service{{Name: "svc", Workers: workers, Work: sim.Dist{Mean: 100 * time.Millisecond}}}}
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if s.OK != 10 || s.P99 != want {
			t.Errorf("%d workers: %d ok, slowest %v ms; want 10 and %v", workers, s.OK, s.P99, want)
		}
	}
}

// A hedge after 30 ms cuts the tail of a latency-bound service whose times are
// exponential (mean 20 ms): the second attempt's own time races the first's. The
// attempts run in goroutines of their own, and the run is still repeatable.
func TestTuning_HedgeCutsTheTail(t *testing.T) {
	p99 := map[bool]float64{}
	for _, hedge := range []bool{false, true} {
		sc := sim.Scenario{Stack: sim.Backstop, Seed: 1, Load: sim.Load{Rate: 200, Duration: 5 * time.Second},
			Services: []sim.Service{{Name: "api", Calls: []string{"db"}},
				{Name: "db", Work: sim.Dist{Mean: 20 * time.Millisecond, Exponential: true}}}}
		if hedge {
			sc.Tuning.Hedge = 30 * time.Millisecond
		}
		a, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sim.Run(t, sc)
		if !bytes.Equal(a.JSON(), b.JSON()) {
			t.Errorf("hedge %v: two runs of one seed differ", hedge)
		}
		// The api's shedder may refuse some calls as the latencies vary (its adaptive
		// limit): the tail compared is that of the calls answered.
		t.Logf("hedge %v: %d of %d ok, db requests %d", hedge, a.OK, a.Calls, a.Requests["db"])
		p99[hedge] = a.P99
	}
	t.Logf("p99 without a hedge %v ms, with %v ms", p99[false], p99[true])
	if p99[true] >= 0.8*p99[false] {
		t.Errorf("p99 with a hedge %v ms, without %v ms; want at least 20 %% less", p99[true], p99[false])
	}
}
