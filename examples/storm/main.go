// Command storm replays a retry storm on loopback and shows what Backstop does about
// it.
//
// Four HTTP services on 127.0.0.1 form a call path: edge → api → data → a database.
// A load generator sends user calls at a fixed rate (Poisson arrivals); the database
// goes down for a while, then comes back. The same scenario runs three times with one
// seed:
//
//   - naive: every layer retries 4 times with un-jittered exponential backoff, no
//     budget, no owner rule;
//   - owner_only: every layer calls the one below through policyhttp with Backstop's
//     retry (same attempts, jittered backoff, deadlines) and the owner rule across
//     services (policyhttp.Middleware on every server), but no breaker, budget or
//     shedder;
//   - backstop: policy.Wrap(deadline, breaker, budget, retry, per-attempt timeout) on
//     every hop, and shed.Middleware on every server.
//
// Then a probe per mode sends one user action while the database is down, with
// nothing to cut it short, and counts the requests that reach the database: 4 × 4 × 4
// = 64 for the naive stack.
//
// It prints the load, a table (every call accounted for, database requests per user
// call, goodput, latency, recovery, what the policies refused) and writes a report
// folder: storm.csv, summary.json, PNG charts and a self-contained index.html.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func main() {
	var (
		duration = flag.Duration("duration", 20*time.Second, "length of each run (three runs are made)")
		seed     = flag.Uint64("seed", 1, "seed for arrivals and jitter")
		rate     = flag.Float64("rate", 100, "user calls per second")
		out      = flag.String("out", "storm-report", "folder for the report")
	)
	flag.Parse()
	if err := storm(*duration, *seed, *rate, *out); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

func storm(duration time.Duration, seed uint64, rate float64, out string) error {
	if duration < 2*time.Second || duration > 10*time.Minute {
		return fmt.Errorf("-duration %v: want between 2s and 10m", duration)
	}
	if rate <= 0 || rate > 500 {
		return fmt.Errorf("-rate %v: want a rate in (0, 500] calls/s", rate)
	}
	base := config{seed: seed, rate: rate, duration: duration, bucket: 100 * time.Millisecond,
		down: duration / 4, up: duration * 3 / 5, hopTimeout: hopTimeout}
	modes := []mode{modeNaive, modeOwnerOnly, modeBackstop}
	fmt.Printf("storm: edge → api → data → db on 127.0.0.1, %.0f calls/s for %v per mode, db down %v–%v, seed %d\n",
		rate, duration, base.down, base.up, seed)
	fmt.Printf("storm: %d runs of %v and %d probes; the whole takes about %v\n\n",
		len(modes), duration, len(modes), time.Duration(len(modes))*(duration+userTimeout)+10*time.Second)

	// One bar over every run, so it never goes backwards; a plain line per mode when
	// stderr is not a terminal.
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	perRun := int(duration / base.bucket)
	bar := progressbar.NewOptions(len(modes)*perRun, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30),
		progressbar.OptionSetVisibility(tty))
	var runs []*series
	var cfgs []config
	for k, m := range modes {
		cfg := base
		cfg.mode = m
		bar.Describe(m.String())
		done := 0
		began := time.Now()
		s, err := run(cfg, func() {
			if done < perRun { // the run's tail (waiting for the last calls) adds nothing
				done++
				_ = bar.Add(1)
			}
		})
		if err != nil {
			return fmt.Errorf("%v run: %w", m, err)
		}
		_ = bar.Set((k + 1) * perRun)
		if !tty {
			fmt.Fprintf(os.Stderr, "storm: %s run done in %v\n", m, time.Since(began).Round(100*time.Millisecond))
		}
		runs, cfgs = append(runs, s), append(cfgs, cfg)
	}
	_ = bar.Finish()

	rs := make([]result, len(modes))
	for k, m := range modes {
		began := time.Now()
		n, err := probe(m, seed)
		if err != nil {
			return fmt.Errorf("%v probe: %w", m, err)
		}
		if !tty {
			fmt.Fprintf(os.Stderr, "storm: %s probe done in %v\n", m, time.Since(began).Round(100*time.Millisecond))
		}
		rs[k] = summarize(m.String(), cfgs[k], runs[k])
		rs[k].probe = n
	}

	text := renderLoad(base, rs) + "\n" + renderTable(rs)
	fmt.Print(text)
	if err := writeReport(out, base, rs, runs, text); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Printf("\nreport: %s/index.html, summary.json\n", out)
	naive, bs := rs[0], rs[len(rs)-1]
	fmt.Printf("storm: backstop lost %d calls; database requests for one user action, database down: naive %d, owner_only %d, backstop %d\n",
		bs.lost, naive.probe, rs[1].probe, bs.probe)
	return nil
}
