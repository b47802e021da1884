package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExplain_TextAndJSON(t *testing.T) {
	code, out, errs := runCLI("explain", "-envoy", "testdata/route.yaml", "-grpc", "testdata/service_config.json")
	if code != exitOK || errs != "" {
		t.Fatalf("explain = %d, stderr %q; want 0 and nothing", code, errs)
	}
	for _, want := range []string{"prefix /api: deadline → retry → attempt-timeout", "at most 3 per call", "worst case:      3s, the overall deadline",
		"/orders.Orders/: deadline → retry", "at most 5 per call", "not honoured by Backstop: retry_policy.retry_on unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI("explain", "-json", "-grpc", "testdata/service_config.json", "-envoy", "testdata/route.yaml")
	if code != exitOK {
		t.Fatalf("explain -json = %d", code)
	}
	var got []struct {
		File        string   `json:"file"`
		Pipeline    string   `json:"pipeline"`
		MaxAttempts int      `json:"max_attempts"`
		WorstCase   *float64 `json:"worst_case_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("explain -json is not JSON: %v\n%s", err, out)
	}
	if len(got) != 3 {
		t.Fatalf("explain -json gave %d entries; want 2 routes and 1 method: %s", len(got), out)
	}
	want := []struct {
		name  string
		max   int
		worst float64
	}{{"prefix /api", 3, 3}, {"prefix /orders.Orders/", 4, 5}, {"/orders.Orders/", 5, 2}}
	for i, w := range want {
		g := got[i]
		if g.Pipeline != w.name || g.MaxAttempts != w.max || g.WorstCase == nil || *g.WorstCase != w.worst {
			t.Errorf("entry %d = %s, max %d, worst %v; want %s, %d, %v", i, g.Pipeline, g.MaxAttempts, g.WorstCase, w.name, w.max, w.worst)
		}
	}
}

func TestLint_ExitCodesAndFindings(t *testing.T) {
	code, out, _ := runCLI("lint", "-envoy", "testdata/route.yaml", "-grpc", "testdata/service_config.json")
	if code != exitFindings {
		t.Errorf("lint of the configs with errors = %d; want %d", code, exitFindings)
	}
	for _, want := range []string{"[attempts-fit]", "only 2 of 3 can run", "[two-owners]", "up to 20 attempts per call",
		"gRPC silently caps it at 5 [max-attempts]", "[retry-500]", "no retryThrottling", "9 findings, 2 errors"} {
		if !strings.Contains(out, want) {
			t.Errorf("lint output lacks %q:\n%s", want, out)
		}
	}

	// A clean config: exit 0.
	dir := t.TempDir()
	clean := filepath.Join(dir, "sc.json")
	if err := os.WriteFile(clean, []byte(`{"methodConfig": [{"name": [{"service": "s"}], "timeout": "5s",
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE"]}}], "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("lint", "-grpc", clean)
	if code != exitOK || !strings.Contains(out, "0 findings, 0 errors") {
		t.Errorf("lint of a clean config = %d:\n%s", code, out)
	}

	code, out, _ = runCLI("lint", "-json", "-envoy", "testdata/route.yaml")
	var fs []finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil || code != exitFindings {
		t.Fatalf("lint -json = %d, %v:\n%s", code, err, out)
	}
	if fs[0].Severity != sevError || fs[0].Check != "attempts-fit" || fs[0].Where != "prefix /api" {
		t.Errorf("first finding %+v; want the attempts-fit error on prefix /api", fs[0])
	}
}

func TestBadInput_ClearErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "route.yaml")
	if err := os.WriteFile(bad, []byte("virtual_hosts:\n- name: v\n  routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badJSON := filepath.Join(dir, "sc.json")
	if err := os.WriteFile(badJSON, []byte(`{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 1}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage:"},
		{[]string{"frobnicate"}, "usage:"},
		{[]string{"explain"}, "give -envoy FILE, -grpc FILE or both"},
		{[]string{"explain", "-envoy", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"lint", "-envoy", bad}, bad + ": policyenvoy: invalid route config: yaml: line"},
		{[]string{"explain", "-grpc", badJSON}, "methodConfig[0].retryPolicy.maxAttempts is 1; want > 1"},
		{[]string{"explain", "-envoy", "testdata/route.yaml", "extra"}, `unexpected argument "extra"`},
		{[]string{"lint", "-nope"}, "flag provided but not defined"},
	} {
		code, _, errs := runCLI(tt.args...)
		if code != exitUsage || !strings.Contains(errs, tt.want) || strings.Contains(errs, "goroutine ") {
			t.Errorf("backstop %q = %d, stderr %q; want %d and a message holding %q", tt.args, code, errs, exitUsage, tt.want)
		}
	}
}
