// Command storm replays a retry storm on loopback and shows what Backstop does about
// it.
//
// Four HTTP services on 127.0.0.1 form a call path: edge → api → data → a database.
// A load generator sends user calls at a fixed rate (Poisson arrivals); the database
// goes down for a while, then comes back. The same scenario runs twice with one seed:
//
//   - naive: every layer retries 4 times with un-jittered exponential backoff, no
//     budget, no owner rule;
//   - backstop: every layer calls the one below through policyhttp with
//     policy.Wrap(deadline, breaker, budget, retry, per-attempt timeout), and every
//     server sits behind shed.Middleware.
//
// It prints a table (database requests per user call, goodput during and after the
// outage, latency, recovery time, calls lost) and writes a report folder: storm.csv,
// two PNG charts and index.html.
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
		duration = flag.Duration("duration", 20*time.Second, "length of each run (two runs are made)")
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
		down: duration / 4, up: duration * 3 / 5}
	fmt.Printf("storm: edge → api → data → db on 127.0.0.1, %.0f calls/s for %v, db down %v–%v, seed %d\n\n",
		rate, duration, base.down, base.up, seed)

	steps := 2 * int(duration/base.bucket)
	bar := progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("naive"),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30),
		progressbar.OptionSetVisibility(term.IsTerminal(int(os.Stderr.Fd()))))
	step := func() { _ = bar.Add(1) }

	naive, err := run(base, step)
	if err != nil {
		return fmt.Errorf("naive run: %w", err)
	}
	bar.Describe("backstop")
	_ = bar.Set(steps / 2)
	bs := base
	bs.backstop = true
	backstop, err := run(bs, step)
	if err != nil {
		return fmt.Errorf("backstop run: %w", err)
	}
	_ = bar.Finish()

	rs := []result{summarize("naive", base, naive), summarize("backstop", bs, backstop)}
	table := renderTable(rs)
	fmt.Print(table)
	if err := writeReport(out, base, rs, []*series{naive, backstop}, table); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Printf("\nreport: %s/index.html\n", out)
	fmt.Printf("storm: backstop lost %d calls; database requests per call during the outage: naive %.2f, backstop %.2f\n",
		rs[1].lost, rs[0].amplification, rs[1].amplification)
	return nil
}
