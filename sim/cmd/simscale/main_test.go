package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse_ErrorsNameTheFlag(t *testing.T) {
	for flag, args := range map[string][]string{
		"-services":  {"-services", "1000,5"},
		"-load":      {"-load", "0"},
		"-duration":  {"-duration", "0s"},
		"-warmup":    {"-duration", "2s", "-warmup", "2s"},
		"-runs":      {"-runs", "0"},
		"-max-ratio": {"-services", "1000", "-max-ratio", "1.2"},
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("%v: got %v, want an error naming %s", args, err, flag)
		}
	}
	c, err := parse(nil)
	if err != nil || len(c.services) != 3 || c.services[2] != 10000 || c.runs != 2 || c.maxRatio != 0 || c.warmup != time.Second {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	if c, err := parse([]string{"-duration", "1s"}); err != nil || c.warmup != 500*time.Millisecond {
		t.Errorf("-duration 1s: warm-up %v, %v; want 500ms, half the duration", c.warmup, err)
	}
}

// Two scales, each played twice, taking turns: a line per run with the same summary's
// hash for each scale, progress every 100 ms of virtual time, the comparison, and a profile of
// each scale's steady window.
func TestMeasure_SameSeedSameSummary(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	c, err := parse([]string{"-services", "12,24", "-duration", "2s", "-cpuprofile", prof})
	if err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	if err := measure(t, c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 10 {
		t.Fatalf("want a header, 4 runs and the comparison:\n%s", out.String())
	}
	hash := func(l string) string { f := strings.Fields(l); return f[len(f)-1] }
	if !strings.HasPrefix(lines[2], "12 ") || !strings.HasPrefix(lines[3], "24 ") ||
		hash(lines[2]) != hash(lines[4]) || hash(lines[3]) != hash(lines[5]) || hash(lines[2]) == hash(lines[3]) {
		t.Errorf("runs:\n%s", out.String())
	}
	if !strings.HasPrefix(lines[9], "24 ") || !strings.Contains(lines[9], "ratio ") {
		t.Errorf("comparison: %q", lines[9])
	}
	if !strings.Contains(progress.String(), "24 services: 2.0 of ~5 s virtual") {
		t.Errorf("progress: %q", progress.String())
	}
	for _, n := range []string{"12", "24"} {
		if fi, err := os.Stat(filepath.Join(filepath.Dir(prof), "cpu-"+n+".prof")); err != nil || fi.Size() == 0 {
			t.Errorf("profile of %s services: %v", n, err)
		}
	}
}

// The ratio is of the medians of the steady CPU per call; one above -max-ratio fails,
// naming the scale.
func TestCompare_FailsAboveMaxRatio(t *testing.T) {
	runs := [][]figures{
		{{steady: 40}, {steady: 50}, {steady: 44}}, // median 44
		{{steady: 49}, {steady: 52}, {steady: 48}}, // median 49: 1.114 times; turns 1.225, 1.040, 1.091
	}
	for _, tc := range []struct {
		max  float64
		fail bool
	}{{0, false}, {1.2, false}, {1.1, true}} {
		var out bytes.Buffer
		err := compare(config{services: []int{1000, 10000}, maxRatio: tc.max}, runs, &out)
		if (err != nil) != tc.fail || tc.fail && !strings.Contains(err.Error(), "10000 services: 1.114 times") {
			t.Errorf("-max-ratio %v: got %v, want failure %v", tc.max, err, tc.fail)
		}
		if !strings.Contains(out.String(), "10000     49.0 (48.0–52.0)  ratio 1.114, by turns 1.091 (1.040–1.225)") {
			t.Errorf("-max-ratio %v: printed\n%s", tc.max, out.String())
		}
	}
}
