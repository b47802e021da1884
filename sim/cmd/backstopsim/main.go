// Command backstopsim plays a simulated scenario with Backstop's real stages (package
// sim) for one or more stacks and seeds, in virtual time, and prints a table of
// figures: with -out it also writes each run's summary.json and the spread over seeds.
//
//	go run ./sim/cmd/backstopsim                       # the storm, every stack, seed 1
//	go run ./sim/cmd/backstopsim -load 0.62 -outage 5s-12s -seeds 1-5 -out sim-report
//	go run ./sim/cmd/backstopsim -scenario chain -hops 2 -stack naive,backstop
//	go run ./sim/cmd/backstopsim -scenario layered -services 1000 -load 0.4 -duration 10s
//	go run ./sim/cmd/backstopsim -scenario layered -services 10000 -load 0.4 -outage none -stack backstop -progress
//
// A simulation runs in a testing/synctest bubble, which needs a *testing.T: the
// command runs its scenarios as the one test of testing.Main (sim.Main).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

// config is what the flags ask for.
type config struct {
	scenario string
	stacks   []sim.Stack
	seeds    []uint64
	rate     float64 // calls/s; 0: from load
	load     float64 // share of the databases' capacity
	duration time.Duration
	outage   [2]time.Duration // from, to; to 0: none
	hops     int
	services int
	network  time.Duration
	out      string
	progress bool
}

func parse(args []string) (config, error) { return parseFor(args, false) }

// parseFor is parse with the default of -progress: whether standard error is a
// terminal.
func parseFor(args []string, terminal bool) (config, error) {
	fs := flag.NewFlagSet("backstopsim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		scenario = fs.String("scenario", "storm", "storm (edge → api → data → db), chain (-hops services above a database) or layered (-services in six layers)")
		stacks   = fs.String("stack", "naive,owner_only,backstop", "stacks to run, comma-separated")
		seeds    = fs.String("seeds", "1", `seeds: one, a range "1-5" or a list "1,4,7"`)
		rate     = fs.Float64("rate", 0, "user calls per second; 0 means -load of the databases' capacity")
		load     = fs.Float64("load", 0.625, "user calls as a share of the databases' capacity, when -rate is 0")
		duration = fs.Duration("duration", 20*time.Second, "how long users arrive, in virtual time")
		outage   = fs.String("outage", "", `the databases' outage "from-to" (e.g. 5s-12s); "" means duration/4 to duration·3/5, "none" none`)
		hops     = fs.Int("hops", 3, "chain: services above the database, 1–5")
		services = fs.Int("services", 1000, "layered: services, at least 6")
		network  = fs.Duration("network", sim.StormNetwork, "one-way delay on the wire")
		out      = fs.String("out", "", "folder for summary.json of every run and spread.json of every stack; empty means none")
		progress = fs.Bool("progress", terminal, "show each run's virtual time and calls on standard error (default: when it is a terminal)")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c := config{scenario: *scenario, rate: *rate, load: *load, duration: *duration, hops: *hops,
		services: *services, network: *network, out: *out, progress: *progress}
	switch c.scenario {
	case "storm", "chain", "layered":
	default:
		return c, fmt.Errorf("-scenario %q: want storm, chain or layered", c.scenario)
	}
	for _, s := range strings.Split(*stacks, ",") {
		st := sim.Stack(strings.TrimSpace(s))
		if st != sim.Naive && st != sim.OwnerOnly && st != sim.Backstop {
			return c, fmt.Errorf("-stack %q: want naive, owner_only or backstop", s)
		}
		c.stacks = append(c.stacks, st)
	}
	var err error
	if c.seeds, err = sim.ParseSeeds(*seeds); err != nil {
		return c, fmt.Errorf("-seeds %q: %w", *seeds, err)
	}
	switch {
	case c.rate < 0:
		return c, fmt.Errorf("-rate %v: want ≥ 0", c.rate)
	case c.rate == 0 && c.load <= 0:
		return c, fmt.Errorf("-load %v: want > 0 (or a -rate)", c.load)
	case c.duration <= 0:
		return c, fmt.Errorf("-duration %v: want > 0", c.duration)
	case c.hops < 1 || c.hops > 5:
		return c, fmt.Errorf("-hops %d: want 1–5", c.hops)
	case c.services < 6:
		return c, fmt.Errorf("-services %d: want at least 6", c.services)
	case c.network < 0:
		return c, fmt.Errorf("-network %v: want ≥ 0", c.network)
	}
	switch *outage {
	case "":
		c.outage = [2]time.Duration{c.duration / 4, c.duration * 3 / 5}
	case "none":
	default:
		from, to, ok := strings.Cut(*outage, "-")
		f, err1 := time.ParseDuration(from)
		t, err2 := time.ParseDuration(to)
		if !ok || err1 != nil || err2 != nil || f < 0 || t <= f {
			return c, fmt.Errorf(`-outage %q: want "from-to", two durations with 0 ≤ from < to, or "none"`, *outage)
		}
		c.outage = [2]time.Duration{f, t}
	}
	return c, nil
}

// scenario builds the run of stack for seed.
func (c config) build(stack sim.Stack, seed uint64) sim.Scenario {
	var sc sim.Scenario
	switch c.scenario {
	case "storm":
		sc = sim.Storm(stack, seed, 1, c.duration)
	case "chain":
		sc = sim.Chain(stack, c.hops, seed, sim.Load{})
	default:
		sc = sim.Layered(stack, c.services, seed, sim.Load{})
		sc.Bucket = time.Second
	}
	rate := c.rate
	if rate == 0 {
		rate = c.load * sc.Capacity()
	}
	sc.Load = sim.Load{Rate: rate, Duration: c.duration}
	sc.Network = sim.Dist{Mean: c.network}
	for i := range sc.Services {
		sv := &sc.Services[i]
		sv.Faults = nil
		if sv.Workers > 0 && c.outage[1] > 0 {
			sv.Faults = []sim.Fault{{Kind: sim.Down, From: c.outage[0], To: c.outage[1]}}
		}
	}
	return sc
}

// simulate runs every stack and seed, printing a line per run and the table to w and,
// if progress is not nil, the virtual time and calls of the run going on to progress
// once a virtual second.
func simulate(t *testing.T, c config, w, progress io.Writer) error {
	fmt.Fprintf(w, "backstopsim: %s, %v of users, outage %s, seeds %v\n", c.scenario, c.duration, outageText(c), seedsText(c.seeds))
	type row struct {
		stack  sim.Stack
		spread sim.Spread
		runs   []sim.Summary
		wall   time.Duration
	}
	var rows []row
	for _, stack := range c.stacks {
		r := row{stack: stack}
		for _, seed := range c.seeds {
			sc := c.build(stack, seed)
			var o sim.Options
			if progress != nil {
				until := sc.Until().Seconds()
				o.Progress = func(v time.Duration, calls int) {
					fmt.Fprintf(progress, "\r  %s seed %d: %.0f of ~%.0f s virtual, %d calls ", stack, seed, v.Seconds(), until, calls)
				}
			}
			start := time.Now()
			s, err := sim.RunWith(t, sc, o)
			if err != nil {
				return err
			}
			el := time.Since(start)
			if progress != nil {
				fmt.Fprintf(progress, "\r%70s\r", "")
			}
			r.wall += el
			r.runs = append(r.runs, s)
			fmt.Fprintf(w, "  %s seed %d: %d calls in %v (%.0f calls per second)\n", stack, seed, s.Calls, el.Round(time.Millisecond), float64(s.Calls)/el.Seconds())
			if c.out != "" {
				if err := sim.WriteRun(c.out, s); err != nil {
					return err
				}
			}
		}
		r.spread = sim.SpreadOf(r.runs)
		if c.out != "" {
			if err := sim.WriteSpread(c.out, stack, r.spread); err != nil {
				return err
			}
		}
		rows = append(rows, r)
	}
	fmt.Fprintln(w)
	table := make([]sim.Row, len(rows))
	for i, r := range rows {
		table[i] = sim.Row{Stack: r.stack, Spread: r.spread}
	}
	sim.WriteTable(w, table)
	return nil
}

func outageText(c config) string {
	if c.outage[1] == 0 {
		return "none"
	}
	return fmt.Sprintf("%v–%v", c.outage[0], c.outage[1])
}

func seedsText(s []uint64) string {
	if len(s) == 1 {
		return strconv.FormatUint(s[0], 10)
	}
	return fmt.Sprintf("%d–%d (%d)", s[0], s[len(s)-1], len(s))
}

func main() {
	terminal := false
	if fi, err := os.Stderr.Stat(); err == nil {
		terminal = fi.Mode()&os.ModeCharDevice != 0
	}
	c, err := parseFor(os.Args[1:], terminal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "backstopsim:", err)
		os.Exit(2)
	}
	sim.Main(func(t *testing.T) int {
		var progress io.Writer
		if c.progress {
			progress = os.Stderr
		}
		if err := simulate(t, c, os.Stdout, progress); err != nil {
			fmt.Fprintln(os.Stderr, "backstopsim:", err)
			return 1
		}
		return 0
	})
}
