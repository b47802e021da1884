package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md's lint table and sample outputs from the tests")

func runCLI(args ...string) (code int, stdout, stderr string) {
	return runStdin("", args...)
}

func runStdin(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func lintJSON(t *testing.T, args ...string) (int, []finding) {
	t.Helper()
	code, out, errs := runCLI(append([]string{"lint", "-json"}, args...)...)
	var fs []finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("lint -json %q = %d, %v; stdout:\n%s\nstderr:\n%s", args, code, err, out, errs)
	}
	return code, fs
}

// goWords are Go names that output meant for mesh and gRPC users must not hold.
var goWords = regexp.MustCompile(`\bOptions\.|policyenvoy|policygrpc|\bpolicy\.|\bretry\.|\bdeadline\.|\bbudget\.|ShouldRetry|Backoff\{|\bErr[A-Z]|→`)

var seedArgs = []string{"-envoy", "testdata/seed-envoy-route.yaml", "-grpc", "testdata/seed-grpc-service-config.json"}

// TestExplain_SeedConfigs: the seed's configs, as users paste them, load verbatim and
// are explained in Envoy's and gRPC's words, with no Go names in the output.
func TestExplain_SeedConfigs(t *testing.T) {
	code, out, errs := runCLI(append([]string{"explain"}, seedArgs...)...)
	if code != exitOK || errs != "" {
		t.Fatalf("explain of the seeds = %d, stderr %q; want 0 and nothing", code, errs)
	}
	for _, want := range []string{
		`testdata/seed-envoy-route.yaml:1:1: Envoy route "route"`,
		"timeout:                  3s for the whole request",
		"per_try_timeout:          1s for each try",
		"tries:                    up to 3: the first and num_retries 2",
		"retry_on:                 connect-failure, reset, retriable-status-codes",
		"retriable_status_codes:   503",
		"retry N waits a random time in [0, (2^N − 1) × 100ms] (base_interval), at most 1s (max_interval)",
		"before try 2: 0s–100ms, mean 50ms",
		"Retry-After:              not honoured: Envoy waits for a server's Retry-After only under rate_limited_retry_back_off",
		"worst case:               3s, bound by timeout",
		"testdata/seed-grpc-service-config.json:2:20: gRPC methodConfig[0] for /orders.v1.OrderService/",
		"timeout:                  none",
		"retryPolicy.maxAttempts:  4 attempts at most",
		"retryableStatusCodes:     UNAVAILABLE",
		"min(initialBackoff 100ms × backoffMultiplier 2^(N−1), maxBackoff 1s), ±20% at random",
		"before attempt 4: 320ms–480ms, mean 400ms",
		"grpc-retry-pushback-ms",
		"retryThrottling:          gRFC A6 retry throttling for the channel: 10 tokens",
		"worst case:               unbounded: no timeout",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if m := goWords.FindString(out); m != "" {
		t.Errorf("explain output holds the Go name %q:\n%s", m, out)
	}

	code, out, _ = runCLI(append([]string{"explain", "-json"}, seedArgs...)...)
	if m := goWords.FindString(out); m != "" {
		t.Errorf("explain -json holds the Go name %q:\n%s", m, out)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK || len(got) != 2 {
		t.Fatalf("explain -json of the seeds = %d, %v:\n%s", code, err, out)
	}
	r, m := got[0], got[1]
	for k, want := range map[string]any{"config": "envoy-route", "route": "route", "line": 1.0, "column": 1.0, "timeout_seconds": 3.0,
		"per_try_timeout_seconds": 1.0, "attempts_at_most": 3.0, "num_retries": 2.0, "base_interval_seconds": 0.1,
		"max_interval_seconds": 1.0, "retry_after_honoured": false, "worst_case_seconds": 3.0, "worst_case_bound_by": "timeout"} {
		if r[k] != want {
			t.Errorf("route %s = %v; want %v", k, r[k], want)
		}
	}
	for k, want := range map[string]any{"config": "grpc-method-config", "field": "methodConfig[0]", "line": 2.0, "column": 20.0,
		"timeout_seconds": nil, "policy": "retryPolicy", "attempts_at_most": 4.0, "max_attempts_as_written": 4.0,
		"initial_backoff_seconds": 0.1, "max_backoff_seconds": 1.0, "backoff_multiplier": 2.0, "worst_case_seconds": nil} {
		if m[k] != want {
			t.Errorf("method %s = %v; want %v", k, m[k], want)
		}
	}
	if fmt.Sprint(r["retry_on"], r["retriable_status_codes"], m["status_codes"], m["retry_throttling"].(map[string]any)["max_tokens"]) !=
		"[connect-failure reset retriable-status-codes] [503] [UNAVAILABLE] 10" {
		t.Errorf("lists = %v %v %v", r["retry_on"], r["retriable_status_codes"], m["status_codes"])
	}
}

// TestLint_SeedConfigs: the seed's configs have no error-level finding, alone or
// together.
func TestLint_SeedConfigs(t *testing.T) {
	for _, args := range [][]string{seedArgs[:2], seedArgs[2:], seedArgs} {
		code, fs := lintJSON(t, args...)
		if code != exitOK {
			t.Errorf("lint %q = %d; want %d", args, code, exitOK)
		}
		for _, f := range fs {
			if f.Level == levelError {
				t.Errorf("lint %q: %v; want no error", args, f)
			}
		}
	}
	_, out, _ := runCLI(append([]string{"lint"}, seedArgs...)...)
	for _, want := range []string{
		`testdata/seed-envoy-route.yaml:8:5: warning [attempts-fit]: route "route": 3 tries of per_try_timeout 1s and their back-off do not fit in timeout 3s`,
		"fix: raise timeout to 3.4s, or lower num_retries to 1, or per_try_timeout to 866ms",
		`testdata/seed-envoy-route.yaml:4:3: warning [maybe-two-owners]: route "route": 2 layers retry if they are on one call path (app gRPC /orders.v1.OrderService/ (4 tries) -> sidecar route "route" (3 tries)): up to 12 attempts per user request`,
		`fix: keep one owner, app gRPC /orders.v1.OrderService/: drop route "route"'s retry_policy`,
		"testdata/seed-grpc-service-config.json:4:5: warning [no-timeout]",
		"5 findings, 0 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lint of the seeds lacks %q:\n%s", want, out)
		}
	}
}

func fileExists(f string) bool {
	_, err := os.Stat(f)
	return err == nil
}

// example is a check's example config: the files that trigger it.
func example(t *testing.T, id string) (args []string, files []string) {
	t.Helper()
	for _, ext := range []string{"yaml", "json"} {
		f := filepath.Join("testdata", "lint", id+"."+ext)
		if _, err := os.Stat(f); err != nil {
			continue
		}
		flagName := map[string]string{"yaml": "-envoy", "json": "-grpc"}[ext]
		args = append(args, flagName, f)
		files = append(files, f)
	}
	if f := filepath.Join("testdata", "lint", id+".backstop.yaml"); fileExists(f) {
		args = append(args, "-config", f)
		files = append(files, f)
	}
	if f := filepath.Join("testdata", "lint", id+".k8s.yaml"); fileExists(f) {
		args = append(args, "-k8s", f)
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("check %s has no example in testdata/lint", id)
	}
	return args, files
}

// lineAt returns line n of file, trimmed.
func lineAt(t *testing.T, file string, n int) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	if n < 1 || n > len(lines) {
		t.Fatalf("%s has no line %d", file, n)
	}
	return strings.TrimSpace(lines[n-1])
}

// TestLint_EveryCheckHasATriggeringExample: each check fires on its example in
// testdata/lint, at the line and column of the field at fault, with a why and a fix;
// the table of findings in docs/cli.md is made from these runs.
func TestLint_EveryCheckHasATriggeringExample(t *testing.T) {
	var table strings.Builder
	table.WriteString("| id | level | what it catches | example that triggers it |\n|---|---|---|---|\n")
	for _, c := range checks {
		args, files := example(t, c.ID)
		code, fs := lintJSON(t, args...)
		var hit *finding
		for i := range fs {
			if fs[i].ID == c.ID && hit == nil {
				hit = &fs[i]
			}
		}
		if hit == nil {
			t.Errorf("lint of %v: no %s finding in %+v", files, c.ID, fs)
			continue
		}
		if hit.Level != c.Level || hit.Message == "" || hit.Fix == "" || hit.Line < 1 || hit.Column < 1 {
			t.Errorf("%s: %+v; want level %s, a message, a fix and a place", c.ID, *hit, c.Level)
		}
		if wantCode := map[bool]int{true: exitFindings, false: exitOK}[hasError(fs)]; code != wantCode {
			t.Errorf("lint of %v = %d; want %d", files, code, wantCode)
		}
		src := lineAt(t, hit.File, hit.Line)
		var links []string
		for _, f := range files {
			links = append(links, fmt.Sprintf("[%s](../cmd/backstop/%s)", filepath.Base(f), filepath.ToSlash(f)))
		}
		fmt.Fprintf(&table, "| `%s` | %s | %s | %s — %s:%d:%d: `%s` |\n", c.ID, c.Level, escape(c.Catches),
			strings.Join(links, " + "), filepath.Base(hit.File), hit.Line, hit.Column, escape(src))
	}
	checkREADME(t, "lint-findings", table.String())
	for _, c := range checks {
		args, files := example(t, c.ID)
		_, out, _ := runCLI(append([]string{"lint"}, args...)...)
		for _, f := range files {
			out = strings.ReplaceAll(out, f, "FILE")
		}
		if m := goWords.FindString(out); m != "" {
			t.Errorf("lint of the %s example holds the Go name %q:\n%s", c.ID, m, out)
		}
	}
}

func hasError(fs []finding) bool {
	for _, f := range fs {
		if f.Level == levelError {
			return true
		}
	}
	return false
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// TestREADME_SampleOutputs: the sample outputs in docs/cli.md are what the command prints.
func TestREADME_SampleOutputs(t *testing.T) {
	dir := "testdata"
	for _, tt := range []struct {
		marker string
		args   []string
	}{
		{"explain-seed", []string{"explain", "-envoy", "seed-envoy-route.yaml", "-grpc", "seed-grpc-service-config.json"}},
		{"lint-seed", []string{"lint", "-envoy", "seed-envoy-route.yaml", "-grpc", "seed-grpc-service-config.json"}},
		{"lint-testdata", []string{"lint", "-envoy", "route.yaml", "-grpc", "service_config.json"}},
	} {
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		_, out, errs := runCLI(tt.args...)
		if err := os.Chdir(wd); err != nil {
			t.Fatal(err)
		}
		if errs != "" {
			t.Fatalf("%q: stderr %q", tt.args, errs)
		}
		checkREADME(t, tt.marker, "```\n$ backstop "+strings.Join(tt.args, " ")+"\n"+out+"```\n")
	}
}

// checkREADME compares the text of docs/cli.md between <!-- name:begin --> and
// <!-- name:end --> with want, or writes want there under -update.
func checkREADME(t *testing.T, name, want string) {
	t.Helper()
	checkDoc(t, "../../docs/cli.md", name, want)
}

// checkDoc checks that the section name of the guide at path (between
// <!-- name:begin --> and <!-- name:end -->) is want; -update writes it.
func checkDoc(t *testing.T, path, name, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := bytes.Index(data, []byte(begin)), bytes.Index(data, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %s … %s section", path, strings.TrimSpace(begin), end)
	}
	got := string(data[i+len(begin) : j])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte(nil), data[:i+len(begin)]...), want...), data[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's %s section is stale; run go test ./cmd/backstop -run %s -update. Want:\n%s", path, name, t.Name(), want)
}

// TestStdin: a file named - is read from standard input, and named <stdin>.
func TestStdin(t *testing.T) {
	seed, err := os.ReadFile("testdata/seed-envoy-route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runStdin(string(seed), "explain", "-envoy", "-")
	if code != exitOK || !strings.Contains(out, `<stdin>:1:1: Envoy route "route"`) {
		t.Errorf("explain -envoy - = %d, %q:\n%s", code, errs, out)
	}
	code, out, _ = runStdin(`{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s",
  "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["OK"]}}]}`, "lint", "-grpc", "-", "-envoy", "testdata/seed-envoy-route.yaml")
	if code != exitFindings || !strings.Contains(out, "<stdin>:2:72: error [bad-status-code]: methodConfig[0].retryPolicy.retryableStatusCodes[0] is OK") {
		t.Errorf("lint -grpc - = %d:\n%s", code, out)
	}
	if code, _, errs := runStdin("", "lint", "-grpc", "-", "-envoy", "-"); code != exitUsage || !strings.Contains(errs, "only one of -config, -envoy, -grpc and -k8s can read standard input") {
		t.Errorf("both from stdin = %d, %q", code, errs)
	}
}

func TestBadInput_ClearErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "route.yaml")
	if err := os.WriteFile(bad, []byte("virtual_hosts:\n- name: v\n  routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage:"},
		{[]string{"frobnicate"}, "usage:"},
		{[]string{"explain"}, "give -config FILE, -envoy FILE, -grpc FILE, -k8s PATH or several"},
		{[]string{"explain", "-config", "testdata/lint/order.backstop.yaml"},
			"testdata/lint/order.backstop.yaml:6:20: stacks.orders.order[1]: O1: deadline at position 2 is inside retry at position 1"},
		{[]string{"explain", "-envoy", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"explain", "-envoy", bad}, bad + ":3:3: YAML: "},
		{[]string{"explain", "-grpc", "testdata/lint/bad-status-code.json"},
			`testdata/lint/bad-status-code.json:7:47: methodConfig[0].retryPolicy.retryableStatusCodes[1] is "NOT_A_CODE"; want a gRPC status code`},
		{[]string{"explain", "-envoy", "testdata/lint/negative-duration.yaml"},
			"testdata/lint/negative-duration.yaml:6:5: route.retry_policy.per_try_timeout: -1s is negative; Envoy refuses negative durations"},
		{[]string{"explain", "-envoy", "testdata/route.yaml", "extra"}, `unexpected argument "extra"`},
		{[]string{"lint", "-nope"}, "flag provided but not defined"},
		{[]string{"lint", "-max-worst-case", "0s", "-envoy", "testdata/route.yaml"}, "-max-worst-case is 0s; want a duration > 0"},
		{[]string{"explain", "-max-worst-case", "1s", "-envoy", "testdata/route.yaml"}, "flag provided but not defined"},
	} {
		code, _, errs := runCLI(tt.args...)
		if code != exitUsage || !strings.Contains(errs, tt.want) || strings.Contains(errs, "goroutine ") ||
			(strings.Contains(tt.want, ":3:3:") || strings.Contains(tt.want, ":6:5:") || strings.Contains(tt.want, ":7:47:") || strings.Contains(tt.want, ":6:20:")) && !strings.HasPrefix(errs, tt.want) {
			t.Errorf("backstop %q = %d, stderr %q; want %d and a message holding %q", tt.args, code, errs, exitUsage, tt.want)
		}
	}
	// lint reports a refused config as an error finding, placed.
	code, out, _ := runCLI("lint", "-envoy", bad)
	if code != exitFindings || !strings.Contains(out, bad+":3:3: error [refused]: YAML: ") {
		t.Errorf("lint of bad YAML = %d:\n%s", code, out)
	}
}

// TestLint_UnknownRetryOn: a misspelt condition is placed on itself in the
// retry_on string and the fix names the condition meant.
func TestLint_UnknownRetryOn(t *testing.T) {
	_, fs := lintJSON(t, "-envoy", "testdata/lint/unknown-retry-on.yaml")
	for _, f := range fs {
		if f.ID == "unknown-retry-on" {
			if f.Line != 5 || f.Column != 22 || !strings.HasPrefix(f.Fix, "did you mean gateway-error?") || f.Field != "retry_policy.retry_on" {
				t.Errorf("finding %+v; want 5:22, retry_policy.retry_on, and gateway-error suggested", f)
			}
			return
		}
	}
	t.Errorf("no unknown-retry-on finding in %+v", fs)
}

// TestLint_NoTimeoutSaysTheWorstCase: timeout 0s under retries is unbounded without
// a per_try_timeout, and bounded by the tries with one; lint says which.
func TestLint_NoTimeoutSaysTheWorstCase(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"route: {cluster: a, timeout: 0s, retry_policy: {retry_on: reset, num_retries: 2}}", "unbounded: no per_try_timeout either"},
		{"route: {cluster: a, timeout: 0s, retry_policy: {retry_on: reset, num_retries: 2, per_try_timeout: 1s}}",
			"up to 3.1s: 3 tries of per_try_timeout 1s and their longest waits"},
	} {
		_, out, _ := runStdin(tt.src, "lint", "-envoy", "-")
		if !strings.Contains(out, "<stdin>:1:21: warning [no-timeout]") || !strings.Contains(out, tt.want) {
			t.Errorf("lint of %s lacks the no-timeout warning with %q:\n%s", tt.src, tt.want, out)
		}
	}
}

// TestExplain_Hedging: a hedgingPolicy is explained in A6's words.
func TestExplain_Hedging(t *testing.T) {
	_, out, errs := runStdin(`{"methodConfig": [{"name": [{"service": "s", "method": "Get"}], "timeout": "0.5s",
  "hedgingPolicy": {"maxAttempts": 7, "hedgingDelay": "0.1s", "nonFatalStatusCodes": ["UNAVAILABLE", 2]}}]}`, "explain", "-grpc", "-")
	for _, want := range []string{"<stdin>:1:19: gRPC methodConfig[0] for /s/Get", "hedging maxAttempts:      7, which gRPC caps at 5 requests in flight",
		"hedgingDelay:             100ms between them", "nonFatalStatusCodes:      UNAVAILABLE, UNKNOWN", "worst case:               500ms, bound by the timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain of a hedgingPolicy lacks %q (stderr %q):\n%s", want, errs, out)
		}
	}
}

// TestLint_Threshold: -max-worst-case sets the worst case reported.
func TestLint_Threshold(t *testing.T) {
	for _, tt := range []struct {
		limit string
		want  bool
	}{{"1m", true}, {"91s", false}} {
		_, fs := lintJSON(t, "-max-worst-case", tt.limit, "-envoy", "testdata/lint/worst-case.yaml")
		got := false
		for _, f := range fs {
			got = got || f.ID == "worst-case"
		}
		if got != tt.want {
			t.Errorf("-max-worst-case %s: worst-case reported %v; want %v (the worst case is 1m30.1s)", tt.limit, got, tt.want)
		}
	}
}

// TestExplain_RateLimitedBackOff: explain says what rate_limited_retry_back_off does,
// with Envoy's default max_interval, and that Retry-After is honoured only so.
func TestExplain_RateLimitedBackOff(t *testing.T) {
	src := `route:
  cluster: api
  retry_policy:
    retry_on: retriable-status-codes
    retriable_status_codes: [429]
    num_retries: 5
    rate_limited_retry_back_off:
      reset_headers: [{name: Retry-After, format: SECONDS}, {name: X-RateLimit-Reset, format: UNIX_TIMESTAMP}]
`
	code, out, errs := runStdin(src, "explain", "-envoy", "-")
	if code != exitOK {
		t.Fatalf("explain = %d, stderr %q", code, errs)
	}
	for _, want := range []string{"timeout:                  15s, Envoy's default, for the whole request", "Retry-After:              honoured as a reset header",
		"the first of Retry-After (seconds), X-RateLimit-Reset (a Unix timestamp) whose interval is 1s to 5m0s",
		"random(interval, 1.5 × interval), at most 7m30s", "above 5m0s is passed over for the next", "with none left the back-off above applies"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runStdin(strings.Replace(src, "Retry-After", "X-Wait", 1), "explain", "-json", "-envoy", "-")
	if !strings.Contains(out, `"retry_after_honoured": false`) || !strings.Contains(out, "not honoured (Retry-After is not among reset_headers)") {
		t.Errorf("explain without Retry-After among the reset headers:\n%s", out)
	}
}

// FuzzLint: whatever the configs say, lint and explain end with a placed finding or
// error, never a panic, and every finding is placed inside its file.
func FuzzLint(f *testing.F) {
	for _, id := range []string{"refused", "negative-duration", "unknown-retry-on", "two-owners", "no-timeout", "retry-500", "not-honoured"} {
		envoy, _ := os.ReadFile(filepath.Join("testdata", "lint", id+".yaml"))
		grpc, _ := os.ReadFile(filepath.Join("testdata", "lint", id+".json"))
		f.Add(string(envoy), string(grpc))
	}
	seedE, _ := os.ReadFile("testdata/seed-envoy-route.yaml")
	seedG, _ := os.ReadFile("testdata/seed-grpc-service-config.json")
	f.Add(string(seedE), string(seedG))
	f.Add("route: {cluster: a, retry_policy: {retry_on: \"5xx,5xx,\\u00e9x\"}}", `{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 9}}]}`)
	f.Fuzz(func(t *testing.T, envoy, grpc string) {
		in := parse("e.yaml", []byte(envoy), "g.json", []byte(grpc))
		lines := map[string]int{"e.yaml": strings.Count(envoy, "\n") + 1, "g.json": strings.Count(grpc, "\n") + 1}
		for _, x := range lint(in, DefaultMaxWorstCase) {
			// YAML also ends lines at CR, NEL, LS and PS: a line beyond the LF count is
			// still in the input.
			if x.Line < 1 || x.Column < 1 || (x.Line > lines[x.File] && !strings.ContainsAny(envoy, "\r\u0085\u2028\u2029")) ||
				x.Message == "" || x.Level != levelOf(x.ID) {
				t.Fatalf("finding %+v is not placed in its file", x)
			}
		}
		var out, errs bytes.Buffer
		if code := explain(in, false, &out, &errs); code == exitUsage && !strings.Contains(errs.String(), ":") {
			t.Fatalf("explain refused without a place: %q", errs.String())
		}
		var js bytes.Buffer
		if code := explain(in, true, &js, &errs); code == exitOK && !json.Valid(js.Bytes()) {
			t.Fatalf("explain -json is not JSON: %s", js.String())
		}
	})
}

// TestConfig_ExplainAndLint: a Backstop configuration is explained with its routing
// tables and linted with the same findings as the other configs.
func TestConfig_ExplainAndLint(t *testing.T) {
	code, out, errs := runCLI("explain", "-config", "../../config/testdata/backstop.yaml")
	if code != exitOK || !strings.Contains(out, "POST api.example.com/v1/charges → payments") ||
		!strings.Contains(out, "payments.v1.Payments/* → payments") || !strings.Contains(out, "stack reports") {
		t.Errorf("explain -config = %d, %q:\n%s", code, errs, out)
	}
	code, out, _ = runCLI("explain", "-json", "-config", "../../config/testdata/backstop.yaml")
	var views []map[string]any
	if err := json.Unmarshal([]byte(out), &views); code != exitOK || err != nil || views[0]["config"] != "backstop" {
		t.Errorf("explain -json -config = %d, %v:\n%s", code, err, out)
	}
	code, out, _ = runCLI("lint", "-config", "testdata/backstop-lint.yaml")
	for _, want := range []string{
		"testdata/backstop-lint.yaml:7:22: warning [attempts-fit]: stack payments: 3 attempts of attempt_timeout 400ms and their back-off do not fit in the deadline 1s",
		"testdata/backstop-lint.yaml:9:23: warning [retry-500]: stack payments",
		"testdata/backstop-lint.yaml:14:12: warning [no-budget]: stack orders",
		"testdata/backstop-lint.yaml:16:12: warning [no-timeout]: stack inventory: 4 attempts with no deadline",
		"5 findings, 0 errors",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("lint -config = %d; lacks %q:\n%s", code, want, out)
		}
	}
	// An attempt timeout not below the deadline never fires: the first attempt runs, to
	// the deadline, and no retry follows — not "only 0 of 3 run".
	code, out, _ = runStdin("stacks:\n  a:\n    deadline: 3s\n    attempt_timeout: 5s\n    retry: {attempts: 3}\n"+
		"    budget: {token_bucket: {max_tokens: 10, token_ratio: 0.1}}\n", "lint", "-config", "-")
	if want := "attempt_timeout 5s is not below the deadline 3s: it never fires"; code != exitOK || !strings.Contains(out, want) || strings.Contains(out, "only 0 of") {
		t.Errorf("lint -config - (attempt_timeout ≥ deadline) = %d; want %q:\n%s", code, want, out)
	}
	// A refused file: every problem, each an error finding at its place.
	code, out, _ = runStdin("stacks:\n  a: {deadline: 5, retry: {attempts: 0}}\n", "lint", "-config", "-")
	if code != exitFindings || !strings.Contains(out, "<stdin>:2:17: error [refused]: stacks.a.deadline: is the bare number 5") ||
		!strings.Contains(out, "<stdin>:2:38: error [refused]: stacks.a.retry.attempts: is 0") {
		t.Errorf("lint -config - = %d:\n%s", code, out)
	}
}

// TestConfig_EnvAppliesOverrides: -env checks the file as a program that passes its
// environment would run it.
func TestConfig_EnvAppliesOverrides(t *testing.T) {
	t.Setenv("BACKSTOP_ORDERS_RETRY_ATTEMPTS", "0")
	if code, out, _ := runCLI("lint", "-config", "testdata/lint/no-budget.backstop.yaml"); code != exitOK {
		t.Errorf("lint without -env = %d:\n%s", code, out)
	}
	code, out, _ := runCLI("lint", "-env", "-config", "testdata/lint/no-budget.backstop.yaml")
	if code != exitFindings || !strings.Contains(out, "testdata/lint/no-budget.backstop.yaml:1:1: error [refused]: $BACKSTOP_ORDERS_RETRY_ATTEMPTS: stacks.orders.retry.attempts: is 0") {
		t.Errorf("lint -env = %d:\n%s", code, out)
	}
}

// TestExplain_ImportedAsTheirOwnPipelines: explain reads an Envoy route's and a gRPC
// method's stack in the config model; what it says — tries, per-try timeout, back-off
// waits, worst case — is what policyenvoy's and policygrpc's own pipelines do.
func TestExplain_ImportedAsTheirOwnPipelines(t *testing.T) {
	files, _ := filepath.Glob("testdata/lint/*")
	files = append(files, "testdata/route.yaml", "testdata/seed-envoy-route.yaml", "testdata/service_config.json", "testdata/seed-grpc-service-config.json")
	for _, f := range files {
		if strings.HasSuffix(f, ".backstop.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var own []policy.Explanation
		flagName := "-envoy"
		if strings.HasSuffix(f, ".json") {
			flagName = "-grpc"
			sc, err := policygrpc.ParseServiceConfig(data)
			if err != nil {
				continue // refused: lint's example of a refusal
			}
			for _, en := range sc.Entries() {
				own = append(own, en.Pipeline.Explain())
			}
		} else {
			routes, err := policyenvoy.Parse(data)
			if err != nil {
				continue
			}
			for _, r := range routes {
				own = append(own, r.Explain())
			}
		}
		code, out, errs := runCLI("explain", "-json", flagName, f)
		var views []map[string]any
		if err := json.Unmarshal([]byte(out), &views); code != exitOK || err != nil || len(views) != len(own) {
			t.Fatalf("explain -json %s %s = %d, %v, %d views for %d (stderr %q)", flagName, f, code, err, len(views), len(own), errs)
		}
		for i, e := range own {
			v := views[i]
			if got := v["attempts_at_most"]; got != float64(e.MaxAttempts) {
				t.Errorf("%s [%d]: attempts_at_most %v; its own pipeline makes %d", f, i, got, e.MaxAttempts)
			}
			var worst any
			if e.WorstCaseFrom != "" {
				worst = e.WorstCase.Seconds()
			}
			if got := v["worst_case_seconds"]; got != worst {
				t.Errorf("%s [%d]: worst_case_seconds %v; its own pipeline's %v", f, i, got, worst)
			}
			waitsKey := map[string]string{"-envoy": "back_off_waits", "-grpc": "backoff_waits"}[flagName]
			var want any
			if w := waitsOf(e); len(w) > 0 {
				raw, _ := json.Marshal(w)
				_ = json.Unmarshal(raw, &want) // as explain -json reads back
			}
			wantWaits, _ := json.Marshal(want)
			gotWaits, _ := json.Marshal(v[waitsKey])
			if string(gotWaits) != string(wantWaits) {
				t.Errorf("%s [%d]: %s %s; its own pipeline's %s", f, i, waitsKey, gotWaits, wantWaits)
			}
			for _, st := range e.Stack {
				if st.Kind == deadline.KindAttempt && v["per_try_timeout_seconds"] != st.Limit.Seconds() {
					t.Errorf("%s [%d]: per_try_timeout_seconds %v; its own pipeline's %v", f, i, v["per_try_timeout_seconds"], st.Limit)
				}
			}
		}
	}
}

// TestImportedNotes: what the model cannot say of an Envoy route is reported, never
// dropped: a regex match is a not-honoured finding at the route, and explain says
// where the route's stack routes otherwise.
func TestImportedNotes(t *testing.T) {
	src := `virtual_hosts:
- name: v
  domains: ["*"]
  routes:
  - match: {safe_regex: {regex: "/v[0-9]+/x"}}
    route: {cluster: a}
  - match: {prefix: /api}
    route: {cluster: a, retry_policy: {retry_on: reset, num_retries: 1}}
`
	_, out, _ := runStdin(src, "lint", "-envoy", "-")
	if !strings.Contains(out, `<stdin>:5:13: info [not-honoured]: route "regex /v[0-9]+/x": Backstop's routing table does not honour it: the route matches paths by the regex`) {
		t.Errorf("lint lacks the regex match as not-honoured:\n%s", out)
	}
	_, out, _ = runStdin(src, "explain", "-envoy", "-")
	for _, want := range []string{
		`Backstop's stack:         match.safe_regex: the route matches paths by the regex "/v[0-9]+/x", which a pattern cannot say`,
		"Backstop's stack:         match.prefix: prefix /api matches any path that starts so (/apix too)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

// TestRun_UnknownCommandAndHelp: an unknown command is named, with the usage, exit 2;
// -h prints the usage and exits 0.
func TestRun_UnknownCommandAndHelp(t *testing.T) {
	code, _, errs := runCLI("frob")
	if code != exitUsage || !strings.Contains(errs, `unknown command "frob"`) || !strings.Contains(errs, "usage:") {
		t.Errorf("backstop frob = %d, %q", code, errs)
	}
	code, out, _ := runCLI("-h")
	if code != exitOK || !strings.Contains(out, "usage:") {
		t.Errorf("backstop -h = %d, %q", code, out)
	}
}

// TestLint_SyntaxErrorsSayWhatToFix: a file that is not YAML or JSON at all gets a fix
// about its syntax and the flag it goes with, not "correct the field".
func TestLint_SyntaxErrorsSayWhatToFix(t *testing.T) {
	code, out, _ := runStdin("virtual_hosts: [\n", "lint", "-envoy", "-")
	if code != exitFindings || !strings.Contains(out, "fix: fix the YAML or JSON at this place") {
		t.Errorf("lint -envoy of broken YAML = %d:\n%s", code, out)
	}
	code, out, _ = runStdin("virtual_hosts: []\n", "lint", "-grpc", "-")
	if code != exitFindings || !strings.Contains(out, "a gRPC service config goes with -grpc, an Envoy route configuration with -envoy") {
		t.Errorf("lint -grpc of YAML = %d:\n%s", code, out)
	}
}

// TestConfig_LintReportsEveryProblemWithItsFix: one run reports a stack's order
// problem with its fields' problems, and the other stacks' and routes'. Each
// finding has its own fix.
func TestConfig_LintReportsEveryProblemWithItsFix(t *testing.T) {
	src := "stacks:\n  payments:\n    order: [retry, deadline]\n    deadline: 2s\n    retry:\n      attempts: 0\n      stratgy: full\n" +
		"  search:\n    breaker: {failure_ratio: 2}\nhttp:\n  routes:\n    - {match: \"GET /v1/\", stack: paymnts}\n"
	code, out, _ := runStdin(src, "lint", "-config", "-")
	want := `<stdin>:3:20: error [order]: stacks.payments.order[1]: O1: deadline at position 2 is inside retry at position 1 (positions: 1 retry, 2 deadline)
    fix: move the deadline outward or use attempt_timeout, as in order: [deadline, retry]
<stdin>:6:17: error [refused]: stacks.payments.retry.attempts: is 0
    fix: want ≥ 1, such as attempts: 3 (1 never retries)
<stdin>:7:7: error [refused]: stacks.payments.retry.stratgy: unknown field
    fix: rename it "strategy"
<stdin>:9:30: error [refused]: stacks.search.breaker.failure_ratio: is 2
    fix: want a number in (0, 1], such as failure_ratio: 0.5
<stdin>:12:34: error [refused]: http.routes[0].stack: names no stack "paymnts"
    fix: use one of payments, search (did you mean "payments"?)
5 findings, 5 errors
`
	if code != exitFindings || out != want {
		t.Errorf("lint -config - = %d:\n%s\nwant:\n%s", code, out, want)
	}
}

// TestConfig_ExplainSaysWhatIsRetried: a stack's retry line names the statuses
// and codes it retries, not only "transient errors".
func TestConfig_ExplainSaysWhatIsRetried(t *testing.T) {
	src := "stacks:\n  payments:\n    retry: {attempts: 3, http_statuses: [429, 502, 503, 504], grpc_codes: [UNAVAILABLE]}\n"
	code, out, _ := runStdin(src, "explain", "-config", "-")
	want := "  retry:           up to 3 attempts; retries transient errors only (marked retryable, timeouts, refused or reset connections); " +
		"through HTTP routes it retries statuses 429, 502, 503, 504; through gRPC routes, codes UNAVAILABLE; " +
		"Full backoff from 100ms to at most 5s; waits a server's hint up to 30s (a longer one ends the call); " +
		"starts no attempt with less than its per-attempt timeout, if any, left before the deadline\n"
	if code != exitOK || !strings.Contains(out, "\n"+want) {
		t.Errorf("explain -config - = %d:\n%s\nwant the line:\n%s", code, out, want)
	}
	code, out, _ = runStdin(src, "explain", "-json", "-config", "-")
	if code != exitOK || !strings.Contains(out, `"http_statuses": [`) || !strings.Contains(out, `"grpc_codes": [`) {
		t.Errorf("explain -json -config - = %d: no http_statuses or grpc_codes:\n%s", code, out)
	}
}

// TestLint_EveryProblemOfARefusedFile: a route config and a service config with
// three problems each give three findings in one run, each classified on its own.
func TestLint_EveryProblemOfARefusedFile(t *testing.T) {
	_, fs := lintJSON(t, "-envoy", "testdata/lint/envoy-three-problems.yaml")
	var got []string
	for _, f := range fs {
		got = append(got, fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.ID))
	}
	want := []string{"5:3 refused", "7:32 unknown-retry-on", "9:5 refused"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("envoy findings %v; want %v", got, want)
	}
	_, fs = lintJSON(t, "-grpc", "testdata/lint/grpc-three-problems.json")
	got = got[:0]
	for _, f := range fs {
		got = append(got, fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.ID))
	}
	want = []string{"4:5 refused", "6:22 refused", "10:47 bad-status-code"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("grpc findings %v; want %v", got, want)
	}
}
