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
		{[]string{"lint", "-envoy", bad}, bad + ": policyenvoy: invalid route config: line 3: YAML: "},
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

// TestSeedConfigs: the configs as users paste them — an Envoy route: block with no
// match, a gRPC service config — load verbatim; explain says 3 attempts, 1 s per try,
// 3 s overall; lint finds that 3 tries cannot fit in 3 s.
func TestSeedConfigs(t *testing.T) {
	args := []string{"-envoy", "testdata/seed-envoy-route.yaml", "-grpc", "testdata/seed-grpc-service-config.json"}
	code, out, errs := runCLI(append([]string{"explain"}, args...)...)
	if code != exitOK || errs != "" {
		t.Fatalf("explain of the seeds = %d, stderr %q; want 0 and nothing", code, errs)
	}
	for _, want := range []string{"route: deadline → retry → attempt-timeout", "ends after 3s", "up to 3 attempts (num_retries 2)",
		"each attempt ends after 1s", "at most 3 per call", "worst case:      3s, the overall deadline",
		"/orders.v1.OrderService/: budget → retry", "at most 4 per call"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(append([]string{"explain", "-json"}, args...)...)
	var got []struct {
		Pipeline    string   `json:"pipeline"`
		MaxAttempts int      `json:"max_attempts"`
		WorstCase   *float64 `json:"worst_case_seconds"`
		Stack       []struct {
			Kind  string  `json:"kind"`
			Limit float64 `json:"limit_seconds"`
		} `json:"stack"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK || len(got) != 2 {
		t.Fatalf("explain -json of the seeds = %d, %v:\n%s", code, err, out)
	}
	r := got[0]
	if r.Pipeline != "route" || r.MaxAttempts != 3 || r.WorstCase == nil || *r.WorstCase != 3 || len(r.Stack) != 3 ||
		r.Stack[0].Kind != "deadline" || r.Stack[0].Limit != 3 || r.Stack[2].Kind != "attempt-timeout" || r.Stack[2].Limit != 1 {
		t.Errorf("the seed route explained as %+v; want 3 attempts, 1 s per try, 3 s overall", r)
	}

	code, out, _ = runCLI(append([]string{"lint"}, args...)...)
	if code != exitFindings {
		t.Errorf("lint of the seeds = %d; want %d", code, exitFindings)
	}
	for _, want := range []string{"testdata/seed-envoy-route.yaml: route: error: 3 attempts × 1s per try plus back-off do not fit in the 3s timeout: " +
		"when attempts time out, only 2 of 3 can run [attempts-fit]", "[two-owners]", "3 findings, 2 errors"} {
		if !strings.Contains(out, want) {
			t.Errorf("lint output lacks %q:\n%s", want, out)
		}
	}
}

// TestBadInput_NamesTheLineColumnAndField: a typo in the seed is reported where it is
// in the YAML, by its path.
func TestBadInput_NamesTheLineColumnAndField(t *testing.T) {
	seed, err := os.ReadFile("testdata/seed-envoy-route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "route.yaml")
	if err := os.WriteFile(bad, bytes.Replace(seed, []byte("num_retries"), []byte("num_retrys"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("lint", "-envoy", bad)
	want := bad + `: policyenvoy: invalid route config: line 7, column 5: route.retry_policy.num_retrys: unknown field "num_retrys"`
	if code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("lint of a typo = %d, stderr %q; want %d and %q", code, errs, exitUsage, want)
	}
}

// TestExplain_RateLimitedBackOff: explain says what rate_limited_retry_back_off does,
// with Envoy's default max_interval.
func TestExplain_RateLimitedBackOff(t *testing.T) {
	f := filepath.Join(t.TempDir(), "route.yaml")
	if err := os.WriteFile(f, []byte(`route:
  cluster: api
  retry_policy:
    retry_on: retriable-status-codes
    retriable_status_codes: [429]
    num_retries: 5
    rate_limited_retry_back_off:
      reset_headers: [{name: Retry-After, format: SECONDS}, {name: X-RateLimit-Reset, format: UNIX_TIMESTAMP}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("explain", "-envoy", f)
	if code != exitOK {
		t.Fatalf("explain = %d, stderr %q", code, errs)
	}
	for _, want := range []string{"the first of Retry-After (seconds), X-RateLimit-Reset (a Unix timestamp) whose interval is 1s to 5m0s",
		"random(interval, 1.5 × interval), at most 7m30s", "above 5m0s is passed over for the next", "with none left the back-off above applies"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
}
