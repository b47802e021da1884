// Command outage measures how fast Backstop's circuit breaker, at its defaults,
// lets traffic back after an outage of a real upstream.
//
// It builds the pipeline a new user writes,
//
//	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(breaker.New(breaker.Options{Name: "up"})),
//		policy.Must(retry.New(retry.Options{MaxAttempts: 3})))
//
// (the breaker's only option set is OnStateChange, which watches and changes
// nothing), and calls a healthy HTTP server on 127.0.0.1 through
// policyhttp.NewTransport and a Toxiproxy proxy run in-process. Calls go out open
// loop, 50 per second, one goroutine each. Each fault runs on a fresh upstream,
// proxy and breaker: 2 s healthy, the fault, then 5 s more. The faults:
//
//   - down: the proxy disabled (connections refused) for 5 s;
//   - down-long: the same for 60 s;
//   - reset_peer: every connection reset, for 10 s;
//   - timeout: a timeout toxic of 0, so answers never come, for 10 s;
//   - latency: 3 s of latency, beyond the deadline, for 10 s.
//
// -short makes down-long 20 s and every other fault 5 s, for CI.
//
// For each fault it prints the recovery: the time from the fault's end to the
// start of the first answered call that started after it, and to the first such
// call from which every 1-second window of calls is at least 90 % answered. It prints
// the share answered in the second after the first answer, the calls that passed
// the breaker during the fault (those before it first opened trip it; those after
// are probes), the requests sent and received, and the breaker's open periods.
//
// It claims, for every fault: both recoveries within 1 s; at least 90 % of calls
// answered in the second after recovery; at most 1.5 probes per second while the
// upstream is down. Its last line is "outage: ok" when every claim held; else it
// is "outage: FAILED: " and the claims that failed, and the exit status is 1. -out
// writes the figures to summary.json.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The claims.
const (
	maxRecovery = time.Second
	minAfter    = 0.9
	maxProbes   = 1.5 // per second while the upstream is down
)

func main() {
	var (
		only  = flag.String("faults", "", "comma list of faults to run (default all): "+strings.Join(names(), ", "))
		short = flag.Bool("short", false, "down-long lasts 20 s and every other fault 5 s (for CI)")
		out   = flag.String("out", "", "folder for summary.json (none if empty)")
	)
	flag.Parse()
	chosen, err := pick(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage: -faults:", err)
		os.Exit(2)
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "outage: -out:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("outage: 50 calls/s through deadline(2s) → breaker(defaults) → retry(3 attempts) → proxy → upstream; %v healthy, the fault, %v after\n", lead, tail)
	var all []figures
	var failed []string
	for _, f := range chosen {
		d := f.full
		if *short {
			d = f.short
		}
		fmt.Printf("\n%s for %v: %s\n", f.name, d, f.what)
		fg, err := run(f, d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "outage:", err)
			os.Exit(1)
		}
		report(fg)
		fg.Failed = claims(fg)
		all = append(all, fg)
		failed = append(failed, fg.Failed...)
	}
	if *out != "" {
		b, err := json.MarshalIndent(summary{Short: *short, OK: len(failed) == 0, Faults: all}, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, "summary.json"), append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "outage: -out:", err)
			os.Exit(1)
		}
	}
	fmt.Println()
	if len(failed) > 0 {
		for _, c := range failed {
			fmt.Println("outage: claim failed:", c)
		}
		fmt.Println("outage: FAILED:", strings.Join(failed, "; "))
		os.Exit(1)
	}
	fmt.Println("outage: ok")
}

// summary is what summary.json holds.
type summary struct {
	Short  bool      `json:"short"`
	OK     bool      `json:"ok"` // every claim held
	Faults []figures `json:"faults"`
}

func names() []string {
	var ns []string
	for _, f := range faults {
		ns = append(ns, f.name)
	}
	return ns
}

// pick returns the faults a -faults list names, in the order they run.
func pick(list string) ([]fault, error) {
	if list == "" || list == "all" {
		return faults, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(names(), n) {
			return nil, fmt.Errorf("%q: want all, or a list of %s", n, strings.Join(names(), ", "))
		}
		want[n] = true
	}
	var fs []fault
	for _, f := range faults {
		if want[f.name] {
			fs = append(fs, f)
		}
	}
	return fs, nil
}

// report prints one fault's figures.
func report(f figures) {
	fmt.Printf("  healthy before the fault:          %.1f %% answered\n", 100*f.Healthy)
	fmt.Printf("  recovery, first answer:            %s after the fault's end\n", secs(f.FirstOK))
	fmt.Printf("  recovery, every 1 s window ≥ 90 %%: %s after the fault's end\n", secs(f.Stable))
	fmt.Printf("  answered in the second after:      %.1f %%\n", 100*f.After)
	fmt.Printf("  calls during the fault:            %d started, %d passed the breaker (%d before it first opened, %d probes after)\n",
		f.Calls, f.Passed, f.Tripping, f.Probes)
	fmt.Printf("  probes while down:                 %.2f/s, %d half-opens\n", f.ProbeRate, f.HalfOpens)
	fmt.Printf("  requests during the fault:         %d sent to the proxy, %d reached the upstream\n", f.Attempts, f.Upstream)
	var ps []string
	for _, p := range f.Open {
		if p.End < 0 {
			ps = append(ps, fmt.Sprintf("%.2f–(still open)", p.Start))
		} else {
			ps = append(ps, fmt.Sprintf("%.2f–%.2f", p.Start, p.End))
		}
	}
	if len(ps) == 0 {
		ps = []string{"never"}
	}
	fmt.Printf("  breaker open (s from fault start): %s\n", strings.Join(ps, ", "))
}

func secs(s float64) string {
	if s < 0 {
		return "none within the run"
	}
	return fmt.Sprintf("%.3f s", s)
}

// claims returns the claims that f breaks, each naming the fault and the figure.
func claims(f figures) []string {
	failed := []string{} // [] in summary.json when every claim held
	if f.FirstOK < 0 || f.FirstOK > maxRecovery.Seconds() {
		failed = append(failed, fmt.Sprintf("%s: first answer %s, want ≤ %v", f.Fault, secs(f.FirstOK), maxRecovery))
	}
	if f.Stable < 0 || f.Stable > maxRecovery.Seconds() {
		failed = append(failed, fmt.Sprintf("%s: 90 %% recovery %s, want ≤ %v", f.Fault, secs(f.Stable), maxRecovery))
	}
	if f.After < minAfter {
		failed = append(failed, fmt.Sprintf("%s: %.1f %% answered in the second after recovery, want ≥ %.0f %%", f.Fault, 100*f.After, 100*minAfter))
	}
	if f.ProbeRate > maxProbes {
		failed = append(failed, fmt.Sprintf("%s: %.2f probes/s while down, want ≤ %.1f", f.Fault, f.ProbeRate, maxProbes))
	}
	return failed
}
