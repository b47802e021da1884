package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/sim"
)

func parseSimArgs(t *testing.T, args ...string) (*simConfig, string) {
	t.Helper()
	var errb bytes.Buffer
	c, code := parseSim(args, strings.NewReader(""), &errb, false)
	if (c == nil) != (code != exitOK) {
		t.Fatalf("parseSim(%v) = %v, %d", args, c, code)
	}
	return c, errb.String()
}

func TestSim_UsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give -scenario FILE"},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "extra"}, `unexpected argument "extra"`},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-route", "x"}, "-route needs -envoy"},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-method", "/a.B/C"}, "-method needs -grpc"},
		{[]string{"-scenario", "-", "-envoy", "-"}, "only one file can be standard input"},
		{[]string{"-scenario", "testdata/sim/nothere.yaml"}, "nothere.yaml"},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-stack", "naive,envoy"}, `-stack "envoy"`},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-seeds", "3-1"}, `-seeds "3-1"`},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-envoy", "testdata/route.yaml", "-route", "nope"},
			`testdata/route.yaml:1:1: no route "nope"; the routes are "prefix /api", "prefix /orders.Orders/"`},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-grpc", "testdata/service_config.json", "-method", "/x.Y/Z"},
			`no methodConfig entry names "/x.Y/Z"`},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-k8s-route", "x"}, "-k8s-route needs -k8s"},
		{[]string{"-scenario", "testdata/sim/probe.yaml", "-k8s", "testdata/sim/k8s", "-k8s-route", "HTTPRoute a/b rules[0]"},
			`no route rule "HTTPRoute a/b rules[0]"; the rules are "VirtualService shop/all http[0]"`},
	} {
		_, errs := parseSimArgs(t, c.args...)
		if !strings.Contains(errs, c.want) {
			t.Errorf("backstop sim %v: stderr %q, want it to contain %q", c.args, errs, c.want)
		}
	}
}

// A scenario file's errors are each placed at file:line:column, all of them.
func TestSim_ScenarioErrorsPlaced(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.yaml")
	src := "stack: envoy\nload: {rate: 1, duration: 2}\nservices:\n  - {name: a, workrs: 1}\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs := parseSimArgs(t, "-scenario", f)
	want := f + ":1:8: stack: \"envoy\"; want naive, owner_only or backstop\n" +
		f + `:2:27: load.duration: "2" is not a duration; want one such as "7s" or "250ms"` + "\n" +
		f + ":4:15: services[0].workrs: unknown field; want one of name, workers, work, queue, calls, stack, faults\n"
	if errs != want {
		t.Errorf("stderr:\n%s\nwant\n%s", errs, want)
	}
	// With the file fixed, stack envoy is refused without -envoy, and known with it.
	src = strings.NewReplacer("duration: 2}", "duration: 2s}", "workrs", "queue").Replace(src)
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs = parseSimArgs(t, "-scenario", f); !strings.Contains(errs, f+`:1:8: stack: "envoy"; want naive, owner_only or backstop`) {
		t.Errorf("stack envoy without -envoy: %q", errs)
	}
	if c, errs := parseSimArgs(t, "-scenario", f, "-envoy", "testdata/route.yaml"); c == nil {
		t.Errorf("stack envoy with -envoy: %q", errs)
	}
}

// What the route does to the database, exactly: one user action with the database
// down makes 3 requests through the Envoy route (num_retries 2), 5 through the gRPC
// config (maxAttempts 8, capped at 5 by gRPC), 4 through the naive loop.
func TestSim_RouteRequestsToTheDatabase(t *testing.T) {
	c, errs := parseSimArgs(t, "-scenario", "testdata/sim/probe.yaml", "-envoy", "testdata/route.yaml",
		"-grpc", "testdata/service_config.json", "-method", "/orders.Orders/Get", "-out", "")
	if c == nil {
		t.Fatal(errs)
	}
	if got := strings.Join(stackNames(c.stacks), ","); got != "naive,envoy,grpc" {
		t.Errorf("stacks %s, want the file's then envoy and grpc", got)
	}
	for stack, want := range map[sim.Stack]int{"naive": 4, "envoy": 3, "grpc": 5} {
		sc := c.sc
		sc.Stack = stack
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Requests["db"]; got != want || s.Failed != 1 {
			t.Errorf("%s: %d database requests for one failed action (failed %d), want %d", stack, got, s.Failed, want)
		}
	}
}

// A mesh's retries multiply: with Istio's sidecars retrying every call twice (3
// tries), one user action through two hops makes 3 × 3 = 9 database requests; with
// one owner, 4 (the owner's attempts).
func TestSim_MeshRetriesMultiplyOverHops(t *testing.T) {
	c, errs := parseSimArgs(t, "-scenario", "testdata/sim/chain.yaml", "-k8s", "testdata/sim/k8s", "-stack", "k8s,owner_only", "-out", "")
	if c == nil {
		t.Fatal(errs)
	}
	for stack, want := range map[sim.Stack]int{"k8s": 9, "owner_only": 4} {
		sc := c.sc
		sc.Stack = stack
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Requests["db"]; got != want || s.Failed != 1 {
			t.Errorf("%s: %d database requests for one failed action (failed %d), want %d", stack, got, s.Failed, want)
		}
	}
}

func TestSim_WritesTableSummariesCharts(t *testing.T) {
	out := t.TempDir()
	c, errs := parseSimArgs(t, "-scenario", "testdata/sim/short.yaml", "-envoy", "testdata/route.yaml",
		"-stack", "naive,envoy", "-seeds", "1,2", "-out", out)
	if c == nil {
		t.Fatal(errs)
	}
	var stdout, progress bytes.Buffer
	if err := simulate(t, c, &stdout, &progress); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"req/call in fault", "\nnaive ", "\nenvoy ", "db's requests per call", "requests-db.png, answered.png"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout has no %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(progress.String(), "envoy seed 2: ") || !strings.Contains(progress.String(), " s virtual") {
		t.Errorf("progress:\n%q", progress.String())
	}
	for _, f := range []string{"naive/seed-1/summary.json", "envoy/seed-2/summary.json", "envoy/spread.json", "requests-db.png", "answered.png"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if strings.HasSuffix(f, ".png") && !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", f)
		}
	}
	var s sim.Summary
	b, _ := os.ReadFile(filepath.Join(out, "envoy/seed-1/summary.json"))
	if err := json.Unmarshal(b, &s); err != nil || s.Stack != "envoy" || s.Calls == 0 || s.Outage == nil {
		t.Errorf("envoy/seed-1/summary.json: %+v, %v", s, err)
	}
}

func stackNames(s []sim.Stack) []string {
	out := make([]string, len(s))
	for i, st := range s {
		out[i] = string(st)
	}
	return out
}
