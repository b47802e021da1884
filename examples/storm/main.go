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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func main() {
	var (
		duration = flag.Duration("duration", claimDuration, "length of each run (three runs are made per seed)")
		seed     = flag.Uint64("seed", 1, "seed for arrivals and jitter")
		seeds    = flag.String("seeds", "", `run every seed of a range or list ("1-10", "1,4,7") and print one line per seed and the worst; each seed's report goes to -out/seed-N`)
		contend  = flag.Int("contend", 0, "goroutines kept busy beside the storm, to run it under CPU contention")
		check    = flag.String("claims", "all", `the claims whose failure makes the storm exit non-zero: "all", or a list of lost, recovery, ok, goodput, peak; the others are still checked and printed`)
		rate     = flag.Float64("rate", claimRate, "user calls per second")
		out      = flag.String("out", "storm-report", "folder for the report")
	)
	flag.Parse()
	list := []uint64{*seed}
	if *seeds != "" {
		var err error
		if list, err = parseSeeds(*seeds); err != nil {
			fmt.Fprintln(os.Stderr, "storm: -seeds:", err)
			os.Exit(2)
		}
	}
	if *contend < 0 || *contend > 64 {
		fmt.Fprintf(os.Stderr, "storm: -contend %d: want 0 to 64 busy goroutines\n", *contend)
		os.Exit(2)
	}
	gate, err := parseClaims(*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm: -claims:", err)
		os.Exit(2)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (*duration != claimDuration || *rate != claimRate) && !set["claims"] {
		// The README's claims are of its scenario: a shorter outage than the user's
		// patience, or another load, is another experiment.
		fmt.Printf("storm: the claims are stated for -duration %v -rate %v; this run's are printed, not gated (-claims all gates them)\n",
			claimDuration, claimRate)
		gate = map[string]bool{}
	}
	if err := writable(*out); err != nil {
		fmt.Fprintln(os.Stderr, "storm: -out:", err)
		os.Exit(2)
	}
	failed, err := storms(*duration, list, *seeds != "", *contend, *rate, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
	exit := 0
	for _, f := range failed {
		if gate[f.claim] {
			fmt.Println("storm: claim failed:", f.text)
			exit = 1
		} else {
			fmt.Println("storm: claim not met (not gated by -claims):", f.text)
		}
	}
	os.Exit(exit)
}

// writable makes the report folder dir, if need be, and checks that a file can be
// written in it, so that an unusable -out fails before the runs, not after them.
func writable(dir string) error {
	if dir == "" {
		return errors.New("empty; want a folder for the report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".storm-*")
	if err != nil {
		return fmt.Errorf("%q is not writable: %w", dir, err)
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		return fmt.Errorf("%q: %w", dir, err)
	}
	return os.Remove(name)
}

// claimNames are the claims -claims may name.
var claimNames = []string{"lost", "recovery", "ok", "goodput", "peak"}

// parseClaims reads -claims: "all" or a comma-separated list of claimNames.
func parseClaims(v string) (map[string]bool, error) {
	gate := map[string]bool{}
	if v == "all" {
		for _, n := range claimNames {
			gate[n] = true
		}
		return gate, nil
	}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(claimNames, n) {
			return nil, fmt.Errorf("%q: want all, or a list of %s", n, strings.Join(claimNames, ", "))
		}
		gate[n] = true
	}
	return gate, nil
}

// parseSeeds reads "1-10", "3" or "1,4,7".
func parseSeeds(v string) ([]uint64, error) {
	var list []uint64
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: want seeds as 1-10 or 1,4,7", v)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q: want a range low-high with low ≤ high", part)
			}
		}
		if b-a >= 100 || len(list)+int(b-a) >= 100 {
			return nil, fmt.Errorf("%q: at most 100 seeds", v)
		}
		for x := a; x <= b; x++ {
			list = append(list, x)
		}
	}
	return list, nil
}

// busy keeps n goroutines spinning until stop is called: CPU contention beside the
// storm, as a build or a noisy neighbour would make it.
func busy(n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := range 1 << 16 {
					x += i
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// The claims the README makes of the storm, checked for every seed: Backstop loses no
// call, recovers within a second of the database's return, answers at least 99 % as
// many calls as the owner rule alone and 95 % of its goodput after the outage, and
// never offers the database more than its capacity.
const (
	claimDuration     = 20 * time.Second // each run's length, and
	claimRate         = 100              // the user calls per second, the claims are stated for
	claimRecovery     = time.Second
	claimOKShare      = 0.99
	claimGoodputShare = 0.95
	claimPeakLoad     = 1.0
)

// ownerAndBackstop returns the results of the owner_only and backstop modes.
func ownerAndBackstop(rs []result) (owner, bs result) {
	for _, r := range rs {
		switch r.name {
		case modeOwnerOnly.String():
			owner = r
		case modeBackstop.String():
			bs = r
		}
	}
	return owner, bs
}

// broken is a claim a seed broke.
type broken struct{ claim, text string }

// claims returns the claims a seed's results break, each naming itself.
func claims(seed uint64, rs []result) []broken {
	owner, bs := ownerAndBackstop(rs)
	var failed []broken
	add := func(claim, format string, args ...any) {
		failed = append(failed, broken{claim, fmt.Sprintf("seed %d: ", seed) + fmt.Sprintf(format, args...)})
	}
	if bs.lost > 0 {
		add("lost", "backstop lost %d calls; want 0", bs.lost)
	}
	if bs.recovery < 0 || bs.recovery > claimRecovery {
		add("recovery", "backstop recovery %s; want ≤ %v", recoveryText(bs.recovery), claimRecovery)
	}
	if float64(bs.ok) < claimOKShare*float64(owner.ok) {
		add("ok", "backstop answered %d calls ok, %.1f %% of owner_only's %d; want ≥ %.0f %%",
			bs.ok, 100*float64(bs.ok)/float64(owner.ok), owner.ok, 100*claimOKShare)
	}
	if bs.goodputAfter < claimGoodputShare*owner.goodputAfter {
		add("goodput", "backstop goodput after the outage %.1f ok/s, %.1f %% of owner_only's %.1f; want ≥ %.0f %%",
			bs.goodputAfter, 100*bs.goodputAfter/owner.goodputAfter, owner.goodputAfter, 100*claimGoodputShare)
	}
	if peak := float64(bs.peakDB) / float64(dbCapacity); peak > claimPeakLoad {
		add("peak", "backstop's peak offered database load %.2f × capacity; want ≤ %.1f", peak, claimPeakLoad)
	}
	return failed
}

func recoveryText(d time.Duration) string {
	if d < 0 {
		return "never (within the run)"
	}
	return d.String()
}

// seedLine is one seed's figures: Backstop against the owner rule alone.
type seedLine struct {
	Seed            uint64   `json:"seed"`
	OK              int      `json:"backstop_ok"`
	OwnerOK         int      `json:"owner_only_ok"`
	OKShare         float64  `json:"ok_share"`
	RecoverySeconds *float64 `json:"backstop_recovery_seconds"`
	GoodputAfter    float64  `json:"backstop_goodput_after_outage"`
	OwnerGoodput    float64  `json:"owner_only_goodput_after_outage"`
	GoodputShare    float64  `json:"goodput_share"`
	Lost            int      `json:"backstop_lost"`
	PeakLoad        float64  `json:"backstop_peak_db_load"`
	FailedP50ms     *float64 `json:"backstop_failed_p50_ms"` // null when no call failed
	OwnerFailedP50  *float64 `json:"owner_only_failed_p50_ms"`
	DBPerCallOutage float64  `json:"backstop_db_requests_per_call_outage"`
	OwnerDBOutage   float64  `json:"owner_only_db_requests_per_call_outage"`
}

func lineOf(seed uint64, rs []result) seedLine {
	owner, bs := ownerAndBackstop(rs)
	l := seedLine{Seed: seed, OK: bs.ok, OwnerOK: owner.ok, GoodputAfter: bs.goodputAfter, OwnerGoodput: owner.goodputAfter,
		Lost: bs.lost, PeakLoad: float64(bs.peakDB) / float64(dbCapacity), FailedP50ms: msOrNull(bs.failedP50, bs.failed),
		OwnerFailedP50: msOrNull(owner.failedP50, owner.failed), DBPerCallOutage: bs.amplification, OwnerDBOutage: owner.amplification}
	if owner.ok > 0 {
		l.OKShare = float64(bs.ok) / float64(owner.ok)
	}
	if owner.goodputAfter > 0 {
		l.GoodputShare = bs.goodputAfter / owner.goodputAfter
	}
	if bs.recovery >= 0 {
		v := bs.recovery.Seconds()
		l.RecoverySeconds = &v
	}
	return l
}

func (l seedLine) String() string {
	rec := "never"
	if l.RecoverySeconds != nil {
		rec = fmt.Sprintf("%.1fs", *l.RecoverySeconds)
	}
	return fmt.Sprintf("seed %2d: ok %d vs owner_only %d (%.1f %%), recovery %s, goodput after %.1f vs %.1f ok/s (%.1f %%), lost %d, peak db %.2f×, failures p50 %s vs %s, db requests per call in the outage %.2f vs %.2f",
		l.Seed, l.OK, l.OwnerOK, 100*l.OKShare, rec, l.GoodputAfter, l.OwnerGoodput, 100*l.GoodputShare, l.Lost, l.PeakLoad,
		msText(l.FailedP50ms), msText(l.OwnerFailedP50), l.DBPerCallOutage, l.OwnerDBOutage)
}

// storms runs the storm for every seed and returns the claims that failed.
func storms(duration time.Duration, seeds []uint64, perSeed bool, contend int, rate float64, out string) ([]broken, error) {
	if contend > 0 {
		fmt.Printf("storm: under CPU contention: %d busy goroutines beside the storm on %d CPUs\n", contend, runtime.NumCPU())
		defer busy(contend)()
	}
	var failed []broken
	var lines []seedLine
	for k, seed := range seeds {
		dir := out
		if perSeed {
			dir = filepath.Join(out, fmt.Sprintf("seed-%d", seed))
		}
		rs, err := storm(duration, seed, rate, dir, k == 0, contend)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		failed = append(failed, claims(seed, rs)...)
		lines = append(lines, lineOf(seed, rs))
	}
	if perSeed {
		fmt.Printf("\nstorm: Backstop against the owner rule alone, per seed (%v per mode, %d busy goroutines):\n", duration, contend)
		worst := lines[0]
		for _, l := range lines {
			fmt.Println(l)
			if l.OKShare < worst.OKShare {
				worst = l
			}
		}
		fmt.Printf("worst ok share: %s\n", worst)
		b, err := json.MarshalIndent(lines, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(out, "seeds.json"), append(b, '\n'), 0o644); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

var errDuration = errors.New("-duration: want between 2s and 10m")

// storm runs one seed's three modes, prints its table and writes its report; probes
// (one user action against a dead database per mode) are made when probes is set.
func storm(duration time.Duration, seed uint64, rate float64, out string, probes bool, contend int) ([]result, error) {
	if duration < 2*time.Second || duration > 10*time.Minute {
		return nil, fmt.Errorf("%w (got %v)", errDuration, duration)
	}
	if rate <= 0 || rate > 500 {
		return nil, fmt.Errorf("-rate %v: want a rate in (0, 500] calls/s", rate)
	}
	base := config{seed: seed, rate: rate, duration: duration, bucket: 100 * time.Millisecond,
		down: duration / 4, up: duration * 3 / 5, hopTimeout: hopTimeout, contend: contend}
	modes := []mode{modeNaive, modeOwnerOnly, modeBackstop}
	fmt.Printf("storm: edge → api → data → db on 127.0.0.1, %.0f calls/s for %v per mode, db down %v–%v, seed %d\n",
		rate, duration, base.down, base.up, seed)
	phases := plan(modes, duration, probes)
	var estimate time.Duration
	for _, ph := range phases {
		estimate += ph.budget
	}
	nProbes := 0
	if probes {
		nProbes = len(modes)
	}
	fmt.Printf("storm: %d runs of %v and %d probes; the whole takes about %v\n\n",
		len(modes), duration, nProbes, estimate.Round(time.Second))
	// One bar over every phase, runs and probes, in 100 ms of the estimate, so it
	// never goes backwards and its time left is the estimate's; a plain line per phase
	// when stderr is not a terminal.
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	bar := progressbar.NewOptions(int(estimate/tick), progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30),
		progressbar.OptionSetVisibility(tty))
	began := time.Now()
	var done time.Duration // the budgets of the phases finished
	phase := func(ph phase, f func() error) error {
		bar.Describe(ph.name)
		start := time.Now()
		stop := ticking(func() {
			if time.Since(start) < ph.budget-tick { // a phase over its budget waits at its end
				_ = bar.Add(1)
			}
		})
		err := f()
		stop()
		done += ph.budget
		_ = bar.Set(int(done / tick))
		if !tty && err == nil {
			fmt.Fprintf(os.Stderr, "storm: %s done in %v\n", ph.name, time.Since(start).Round(100*time.Millisecond))
		}
		return err
	}
	var runs []*series
	var cfgs []config
	for k, m := range modes {
		cfg := base
		cfg.mode = m
		var s *series
		if err := phase(phases[k], func() (err error) { s, err = run(cfg, func() {}); return err }); err != nil {
			return nil, fmt.Errorf("%v run: %w", m, err)
		}
		runs, cfgs = append(runs, s), append(cfgs, cfg)
	}

	rs := make([]result, len(modes))
	for k, m := range modes {
		rs[k] = summarize(m.String(), cfgs[k], runs[k])
		if !probes {
			rs[k].probe = -1
			continue
		}
		if err := phase(phases[len(modes)+k], func() (err error) { rs[k].probe, err = probe(m, seed); return err }); err != nil {
			return nil, fmt.Errorf("%v probe: %w", m, err)
		}
	}
	_ = bar.Finish()

	text := renderLoad(base, rs) + "\n" + renderTable(rs) + "\n" + renderTrade(rs)
	fmt.Print(text)
	if err := writeReport(out, base, rs, runs, text); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	fmt.Printf("\nreport: %s/index.html, summary.json\n", out)
	fmt.Printf("storm: runs and probes took %v (estimated %v)\n", time.Since(began).Round(100*time.Millisecond), estimate.Round(100*time.Millisecond))
	naive, bs := rs[0], rs[len(rs)-1]
	if probes {
		fmt.Printf("storm: backstop lost %d calls; database requests for one user action, database down: naive %d, owner_only %d, backstop %d\n",
			bs.lost, naive.probe, rs[1].probe, bs.probe)
	} else {
		fmt.Printf("storm: backstop lost %d calls\n", bs.lost)
	}
	return rs, nil
}

// tick is the step of the progress bar.
const tick = 100 * time.Millisecond

// ticking calls f every tick until stop is called.
func ticking(f func()) (stop func()) {
	t := time.NewTicker(tick)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() { t.Stop(); close(done); <-finished }
}

// A phase is one run or probe, with the time it is expected to take.
type phase struct {
	name   string
	budget time.Duration
}

// plan returns the phases of one seed, runs then probes, and how long each takes.
// A run lasts its duration, and then waits for the calls still out: the naive stack,
// which never recovers within the run, has calls out until the user gives up on them
// (userTimeout); the others answer theirs within a request's timeout, and in practice
// at once. The naive probe lasts as long as its nested retries back off on a database
// that fails at once (naiveProbeTime); the others end within a request's timeout
// (one retry owner, 4 attempts), and in practice within half a second.
func plan(modes []mode, duration time.Duration, probes bool) []phase {
	var ps []phase
	for _, m := range modes {
		tail := probeSlack
		if m == modeNaive {
			tail = userTimeout
		}
		ps = append(ps, phase{m.String() + " run", duration + tail})
	}
	if probes {
		for _, m := range modes {
			d := probeSlack
			if m == modeNaive {
				d = naiveProbeTime() + probeSlack
			}
			ps = append(ps, phase{m.String() + " probe", d})
		}
	}
	return ps
}

// probeSlack is the time a phase takes beyond what it waits for: starting and
// stopping the services, the answers of a database that is up.
const probeSlack = 500 * time.Millisecond

// naiveProbeTime is how long one user action takes on the naive stack when the
// database fails at once: each layer makes 4 attempts of the layer below with the
// un-jittered backoffs between them (50 + 100 + 200 ms), three layers deep.
func naiveProbeTime() time.Duration {
	var backoffs time.Duration
	for n := 2; n <= attempts; n++ {
		backoffs += naiveBase << (n - 2)
	}
	var t time.Duration
	for range 3 { // data → db, api → data, edge → api
		t = attempts*t + backoffs
	}
	return t
}

// msText prints a millisecond figure, or "none failed" for a null one.
func msText(v *float64) string {
	if v == nil {
		return "none failed"
	}
	return fmt.Sprintf("%.0f ms", *v)
}
