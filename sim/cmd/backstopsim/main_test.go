package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse_ErrorsNameTheFlag(t *testing.T) {
	for flag, args := range map[string][]string{
		"-scenario": {"-scenario", "mesh"},
		"-stack":    {"-stack", "backstop,retry-harder"},
		"-seeds":    {"-seeds", "5-1"},
		"-rate":     {"-rate", "-1"},
		"-load":     {"-load", "0"},
		"-duration": {"-duration", "0s"},
		"-hops":     {"-hops", "6"},
		"-services": {"-services", "5"},
		"-network":  {"-network", "-1ms"},
		"-outage":   {"-outage", "12s-5s"},
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), flag+" ") {
			t.Errorf("%v: got %v, want an error naming %s", args, err, flag)
		}
	}
	if _, err := parse([]string{"extra"}); err == nil {
		t.Error("an argument was accepted")
	}
	c, err := parse(nil)
	if err != nil || c.scenario != "storm" || len(c.stacks) != 3 || len(c.seeds) != 1 || c.outage[0] == 0 {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

func TestSimulate_ChainWritesSummaries(t *testing.T) {
	c, err := parse([]string{"-scenario", "chain", "-hops", "2", "-stack", "naive,backstop", "-seeds", "1,2",
		"-duration", "4s", "-outage", "1s-2s", "-out", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	if err := simulate(t, c, &out, &progress); err != nil {
		t.Fatal(err)
	}
	if p := progress.String(); !strings.Contains(p, "naive seed 2: 3 of ~7 s virtual") || !strings.Contains(p, "backstop seed 1: 1 of ~7 s virtual") {
		t.Errorf("progress:\n%q", p)
	}
	for _, f := range []string{"naive/seed-1/summary.json", "naive/seed-2/summary.json", "backstop/seed-2/summary.json", "backstop/spread.json"} {
		if b, err := os.ReadFile(filepath.Join(c.out, f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "backstop ") || !strings.Contains(out.String(), "median/worst") {
		t.Errorf("no table:\n%s", out.String())
	}
}
