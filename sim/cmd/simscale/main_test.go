package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse_ErrorsNameTheFlag(t *testing.T) {
	for flag, args := range map[string][]string{
		"-services": {"-services", "1000,5"},
		"-load":     {"-load", "0"},
		"-duration": {"-duration", "0s"},
		"-runs":     {"-runs", "0"},
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("%v: got %v, want an error naming %s", args, err, flag)
		}
	}
	c, err := parse(nil)
	if err != nil || len(c.services) != 3 || c.services[2] != 10000 || c.runs != 2 {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

// Two scales, each played twice: a line per run with the same summary's hash, and
// progress once a virtual second.
func TestMeasure_SameSeedSameSummary(t *testing.T) {
	c, err := parse([]string{"-services", "12,24", "-duration", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	if err := measure(t, c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("want a header and 4 runs:\n%s", out.String())
	}
	hash := func(l string) string { f := strings.Fields(l); return f[len(f)-1] }
	if !strings.HasPrefix(lines[2], "12 ") || !strings.HasPrefix(lines[4], "24 ") ||
		hash(lines[2]) != hash(lines[3]) || hash(lines[4]) != hash(lines[5]) || hash(lines[2]) == hash(lines[4]) {
		t.Errorf("runs:\n%s", out.String())
	}
	if !strings.Contains(progress.String(), "24 services: 2 of ~5 s virtual") {
		t.Errorf("progress: %q", progress.String())
	}
}
