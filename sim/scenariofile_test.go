package sim_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/sim"
)

func TestParseScenario_WorkedExample(t *testing.T) {
	data, err := os.ReadFile("testdata/checkout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := sim.ParseScenario(data, nil)
	if err != nil {
		t.Fatalf("ParseScenario(checkout.yaml) = %v", err)
	}
	want := sim.Scenario{Name: "checkout", Seed: 1, Stack: sim.Backstop, Network: sim.Dist{Mean: 500 * time.Microsecond},
		Load: sim.Load{Share: 0.62, Duration: 20 * time.Second, UserTimeout: 3 * time.Second},
		Services: []sim.Service{
			{Name: "edge", Calls: []string{"api"}},
			{Name: "api", Calls: []string{"orders"}},
			{Name: "orders", Calls: []string{"db"}},
			{Name: "db", Workers: 4, Work: sim.Dist{Mean: 25 * time.Millisecond},
				Faults: []sim.Fault{{Kind: sim.Down, From: 5 * time.Second, To: 12 * time.Second}}},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseScenario(checkout.yaml) =\n%+v\nwant\n%+v", got, want)
	}
}

// placed returns the errors of ParseScenario as "line:col: path: msg" lines.
func placed(t *testing.T, src string, custom map[sim.Stack]sim.ClientFunc) []string {
	t.Helper()
	_, err := sim.ParseScenario([]byte(src), custom)
	if err == nil {
		t.Fatalf("ParseScenario accepted:\n%s", src)
	}
	if !errors.Is(err, sim.ErrInvalidScenario) {
		t.Errorf("ParseScenario: %v does not match ErrInvalidScenario", err)
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseScenario_EveryErrorPlaced(t *testing.T) {
	src := `name: x
stack: backstop
tuning: {attempts: 4, base: 50}
load: {rate: 10, duration: 2s, users: two}
services:
  - name: db
    workrs: 4
    work: {mean: 25ms}
    faults:
      - {kind: down, from: 5s, to: 1s}
  - name: db
    calls: [nowhere]
`
	got := placed(t, src, nil)
	// The decoding errors and the rules broken, all of them, in the file's order.
	want := []string{
		`3:29: tuning.base: "50" is not a duration; want one such as "7s" or "250ms"`,
		`4:39: load.users: "two"; want a whole number`,
		`7:5: services[0].workrs: unknown field; want one of name, workers, work, queue, calls, stack, faults`,
		`10:36: services[0].faults[0].to: 5s–1s; want 0 ≤ From < To`,
		`11:11: services[1].name: "db" named twice; want each service named once`,
		`12:13: services[1].calls[0]: "nowhere" names no service; want one of "db"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Once it decodes, the same rules, at the same places.
	src = strings.NewReplacer("base: 50", "base: 50ms", "users: two", "user_timeout: 1s", "workrs", "workers").Replace(src)
	got = placed(t, src, nil)
	if !reflect.DeepEqual(got, want[3:]) {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want[3:], "\n"))
	}
}

// TestParseScenario_ReportsEveryProblemAtOnce: a value of the wrong kind and two
// rules broken come back in one run, in the file's order. Each is placed and has
// its fix. The rule that reads the unreadable duration is not checked.
func TestParseScenario_ReportsEveryProblemAtOnce(t *testing.T) {
	data, err := os.ReadFile("testdata/three-problems.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := placed(t, string(data), nil)
	want := []string{
		`9:13: load.duration: "20 s" is not a duration; want one such as "7s" or "250ms"`,
		`15:13: services[1].calls[0]: "ordrs" names no service; did you mean "orders"?`,
		`22:37: services[3].faults[0].to: 12s–5s; want 0 ≤ From < To`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseScenario(three-problems.yaml):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each is a ScenarioError matching ErrInvalidScenario.
	_, err = sim.ParseScenario(data, nil)
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *sim.ScenarioError
		if !errors.As(e, &se) || !errors.Is(e, sim.ErrInvalidScenario) {
			t.Errorf("%v: want a *ScenarioError matching ErrInvalidScenario", e)
		}
	}
}

func TestParseScenario_Refusals(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"", "1:1: empty; want a scenario"},
		{"name: [", "1:1: "},
		{"name: a\nname: b\n", "2:1: name: given twice"},
		{"services: {a: 1}\n", "1:11: services: want a list"},
		{"x: &a 1\n", "1:1: x: unknown field"}, // an unknown field first
		{"name: &a x\n", "1:7: name: anchors and aliases are not supported"},
		{"seed: -1\n", `1:7: seed: "-1"; want a whole number ≥ 0`},
		{"load: {rate: .nan}\n", `1:14: load.rate: ".nan"; want a number`},
		{"tuning: {no_hop_timeout: yes}\n", `1:26: tuning.no_hop_timeout: "yes"; want true or false`},
		{"custom: {}\n", "1:1: custom: unknown field"},
		// Validation: a field left out is placed at its parent.
		{"stack: naive\nload: {duration: 1s}\nservices: [{name: a}]\n", "2:7: load.rate: 0 for 1s; want a rate > 0"},
		{"stack: envoy\nload: {rate: 1, duration: 1s}\nservices: [{name: a}]\n", `1:8: stack: "envoy"; want naive, owner_only or backstop`},
	} {
		// The file's own problem among those of the scenario it leaves out.
		got := placed(t, c.src, nil)
		if !slices.ContainsFunc(got, func(line string) bool { return strings.HasPrefix(line, c.want) }) {
			t.Errorf("ParseScenario(%q) = %q, want a line starting %q", c.src, got, c.want)
		}
	}
}

func TestParseScenario_CustomStack(t *testing.T) {
	custom := map[sim.Stack]sim.ClientFunc{"envoy": func(h sim.Hop) (sim.Client, error) {
		return sim.Client{Pipeline: policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{Clock: h.Clock, Rand: h.Rand}))))}, nil
	}}
	src := "stack: naive\nload: {rate: 1, duration: 1s}\nservices: [{name: a, calls: [b], stack: envoy}, {name: b}]\n"
	sc, err := sim.ParseScenario([]byte(src), custom)
	if err != nil || sc.Services[0].Stack != "envoy" || sc.Custom == nil {
		t.Fatalf("ParseScenario with an envoy stack = %+v, %v", sc, err)
	}
	got := strings.Join(placed(t, strings.Replace(src, "stack: envoy", "stack: grpc", 1), custom), "\n")
	if want := `3:41: services[0].stack: "grpc"; want naive, owner_only, backstop or envoy`; got != want {
		t.Errorf("an unknown stack: %q, want %q", got, want)
	}
}

// FuzzParseScenario: whatever the bytes, ParseScenario returns a scenario that
// validates or errors that are each placed at a line and column ≥ 1 and match
// ErrInvalidScenario; it never panics.
func FuzzParseScenario(f *testing.F) {
	seed, err := os.ReadFile("testdata/checkout.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("stack: naive\nload: {burst: 3}\nservices: [{name: a, calls: [a]}]\n")) // a cycle
	f.Add([]byte(`{"stack": "owner_only", "load": {"users": 2, "think": {"mean": "1s"}, "duration": "5s"}, "services": [{"name": "a"}]}`))
	f.Add([]byte("a: &x [*x]\n")) // an alias
	f.Add([]byte("services:\n  - faults: [{kind: slow, factor: 0.5, from: 1h, to: 2h}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := sim.ParseScenario(data, nil)
		if err == nil {
			if verr := sc.Validate(); verr != nil {
				t.Fatalf("ParseScenario accepted a scenario Validate refuses: %v", verr)
			}
			return
		}
		for _, e := range strings.Split(err.Error(), "\n") {
			var line, col int
			if _, serr := fmtSscanf(e, &line, &col); serr != nil || line < 1 || col < 1 {
				t.Fatalf("error %q is not placed at line:column", e)
			}
		}
		if !errors.Is(err, sim.ErrInvalidScenario) {
			t.Fatalf("%v does not match ErrInvalidScenario", err)
		}
	})
}

func fmtSscanf(s string, line, col *int) (int, error) { return fmt.Sscanf(s, "%d:%d:", line, col) }
