package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

func TestWritableRefusesAnUnusableOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", filepath.Join(file, "report")} {
		if err := writable(bad); err == nil {
			t.Errorf("writable(%q) = nil; want an error", bad)
		}
	}
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 { // root writes anywhere
		if err := writable(readOnly); err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("writable(read-only folder) = %v; want it not writable", err)
		}
	}
	good := filepath.Join(dir, "a", "b")
	if err := writable(good); err != nil {
		t.Fatalf("writable(%q) = %v", good, err)
	}
	if left, _ := os.ReadDir(good); len(left) != 0 {
		t.Errorf("writable left %v behind", left)
	}
}

// TestPlan: the estimate is the runs, the naive run's calls out until the user gives
// up, and the probes, the naive one its nested backoffs: 4 × (4 × 350 ms + 350 ms) +
// 350 ms = 7.35 s.
func TestPlan(t *testing.T) {
	if got, want := naiveProbeTime(), 7350*time.Millisecond; got != want {
		t.Errorf("naiveProbeTime() = %v; want %v", got, want)
	}
	ps := plan([]mode{modeNaive, modeOwnerOnly, modeBackstop}, 20*time.Second, true)
	var total time.Duration
	var names []string
	for _, p := range ps {
		total += p.budget
		names = append(names, p.name)
	}
	if got := strings.Join(names, ", "); got != "naive run, owner_only run, backstop run, naive probe, owner_only probe, backstop probe" {
		t.Errorf("phases %s", got)
	}
	want := 3*20*time.Second + userTimeout + 2*probeSlack + naiveProbeTime() + 3*probeSlack
	if total != want {
		t.Errorf("estimate %v; want %v", total, want)
	}
	if n := len(plan([]mode{modeNaive}, 20*time.Second, false)); n != 1 {
		t.Errorf("without probes, %d phases; want 1", n)
	}
}

func TestZeroFloorLabelsZero(t *testing.T) {
	ticks := zeroFloor{plot.LogTicks{Prec: -1}}.Ticks(logFloor, 1000)
	if len(ticks) == 0 || ticks[0].Value != logFloor || ticks[0].Label != "0" {
		t.Fatalf("ticks %v; want the floor labelled 0 first", ticks)
	}
	for _, tk := range ticks[1:] {
		if tk.Label == "0" || tk.Label == "1" && tk.Value == logFloor {
			t.Errorf("tick %v: only the floor reads 0", tk)
		}
	}
}

func TestMissionChart(t *testing.T) {
	rs := []result{{name: "naive", probe: 64}, {name: "owner_only", probe: 4}, {name: "backstop", probe: 4}}
	p, err := missionChart(rs)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 || p.Y.Max < 64 {
		t.Errorf("y axis %v–%v; want from 0, above 64", p.Y.Min, p.Y.Max)
	}
	if err := p.Save(300, 200, filepath.Join(t.TempDir(), "c.png")); err != nil {
		t.Fatal(err)
	}
	if got := probeText(rs); got != "naive 64, owner_only 4, backstop 4" {
		t.Errorf("probeText = %q", got)
	}
}

// TestFailuresOfAModeThatFailedNone: a mode that answered no call with an error has
// no failure latency: the report says so and summary.json holds null, never 0 s.
func TestFailuresOfAModeThatFailedNone(t *testing.T) {
	none := result{name: "backstop"}
	some := result{name: "owner_only", failed: 3, failedP50: 1500 * time.Millisecond, failedP99: 2 * time.Second}
	if got := failedLatency(none); got != "none failed" {
		t.Errorf("failedLatency(no failures) = %q; want %q", got, "none failed")
	}
	if got := failedLatency(some); got != "1.5s p50 / 2s p99" {
		t.Errorf("failedLatency = %q; want %q", got, "1.5s p50 / 2s p99")
	}
	if v := msOrNull(0, 0); v != nil {
		t.Errorf("msOrNull(0, 0) = %v; want nil (null in summary.json)", *v)
	}
	if v := msOrNull(1500*time.Millisecond, 3); v == nil || *v != 1500 {
		t.Errorf("msOrNull(1.5s, 3) = %v; want 1500", v)
	}
}
