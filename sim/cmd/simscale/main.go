// Command simscale measures what a simulated call costs as the service graph grows. It
// plays the layered scenario (sim.Layered, Backstop stack, no fault) at each number of
// services with the same load per service, a share of the databases' capacity for the
// same virtual time, so that the calls grow with the services. For each it prints the
// CPU time, bytes and allocations per call, the peak of the Go runtime's memory and the
// process's peak resident set, and a SHA-256 of the run's summary.json.
//
//	go run ./sim/cmd/simscale -services 1000,3000,10000 -duration 10s
//	go run ./sim/cmd/simscale -services 10000 -duration 94s -runs 1   # 10⁷ calls
//
// With -runs 2 (the default) it plays each scale twice with the same seed and fails if
// the two summaries differ in a single byte. Progress goes to standard error once a
// virtual second. The process's peak resident set only grows: run one scale per process
// to read each scale's own.
package main

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

type config struct {
	services   []int
	load       float64
	duration   time.Duration
	seed       uint64
	runs       int
	out        string
	cpuprofile string
	quiet      bool
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("simscale", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		services   = fs.String("services", "1000,3000,10000", "numbers of services, comma-separated, each at least 6")
		load       = fs.Float64("load", 0.4, "user calls as a share of the databases' capacity")
		duration   = fs.Duration("duration", 10*time.Second, "how long users arrive, in virtual time")
		seed       = fs.Uint64("seed", 1, "the seed")
		runs       = fs.Int("runs", 2, "runs of each scale with the same seed; their summaries must be the same bytes")
		out        = fs.String("out", "", "folder for each scale's summary.json; empty means none")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
		quiet      = fs.Bool("quiet", false, "no progress on standard error")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c := config{load: *load, duration: *duration, seed: *seed, runs: *runs, out: *out, cpuprofile: *cpuprofile, quiet: *quiet}
	for _, s := range strings.Split(*services, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 6 {
			return c, fmt.Errorf("-services %q: want numbers of at least 6, comma-separated", *services)
		}
		c.services = append(c.services, n)
	}
	switch {
	case c.load <= 0:
		return c, fmt.Errorf("-load %v: want > 0", c.load)
	case c.duration <= 0:
		return c, fmt.Errorf("-duration %v: want > 0", c.duration)
	case c.runs < 1:
		return c, fmt.Errorf("-runs %d: want ≥ 1", c.runs)
	}
	return c, nil
}

// figures are one run's costs.
type figures struct {
	calls      int
	events     uint64
	okShare    float64
	wall, cpu  time.Duration
	bytes      uint64 // allocated
	allocs     uint64
	peakGo     uint64 // the runtime's mapped memory, sampled once a virtual second
	peakRSS    int64  // the process's, so far
	summaryLen int
	sum        [32]byte
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peakRSS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// goMemory is the memory the Go runtime has mapped, the heap and everything else.
func goMemory(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// play runs the layered scenario of n services once.
func play(t *testing.T, c config, n int, progress io.Writer) (figures, error) {
	sc := sim.Layered(sim.Backstop, n, c.seed, sim.Load{})
	sc.Load = sim.Load{Rate: c.load * sc.Capacity(), Duration: c.duration}
	sc.Bucket = time.Second
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	var f figures
	var o sim.Options
	until := sc.Until().Seconds()
	o.Progress = func(v time.Duration, calls int) {
		f.peakGo = max(f.peakGo, goMemory(sample))
		if progress != nil {
			fmt.Fprintf(progress, "\r  %d services: %.0f of ~%.0f s virtual, %d calls ", n, v.Seconds(), until, calls)
		}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	wall, cpu := time.Now(), cpuTime()
	s, err := sim.RunWith(t, sc, o)
	if err != nil {
		return f, err
	}
	f.wall, f.cpu = time.Since(wall), cpuTime()-cpu
	runtime.ReadMemStats(&m1)
	f.peakGo = max(f.peakGo, goMemory(sample))
	f.peakRSS = peakRSS()
	if progress != nil {
		fmt.Fprintf(progress, "\r%60s\r", "")
	}
	f.calls, f.events, f.okShare = s.Calls, s.Events, s.OKShare
	f.bytes, f.allocs = m1.TotalAlloc-m0.TotalAlloc, m1.Mallocs-m0.Mallocs
	js := s.JSON()
	f.summaryLen, f.sum = len(js), sha256.Sum256(js)
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return f, err
		}
		if err := os.WriteFile(fmt.Sprintf("%s/layered-%d-seed%d.json", c.out, n, c.seed), js, 0o644); err != nil {
			return f, err
		}
	}
	return f, nil
}

// measure plays every scale c.runs times, printing a line per run to w.
func measure(t *testing.T, c config, w, progress io.Writer) error {
	fmt.Fprintf(w, "simscale: layered, backstop, %.0f %% of capacity for %v virtual, seed %d, GOMAXPROCS %d\n",
		c.load*100, c.duration, c.seed, runtime.GOMAXPROCS(0))
	fmt.Fprintln(w, "services  calls     events     ok      wall      cpu       µs cpu/call  B/call  allocs/call  peak Go  peak RSS  summary")
	for _, n := range c.services {
		var first figures
		for i := range c.runs {
			f, err := play(t, c, n, progress)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%-9d %-9d %-10d %-7.4f %-9v %-9v %-12.1f %-7.0f %-12.1f %-8s %-9s %x\n",
				n, f.calls, f.events, f.okShare, f.wall.Round(time.Millisecond), f.cpu.Round(time.Millisecond),
				float64(f.cpu.Nanoseconds())/1e3/float64(f.calls), float64(f.bytes)/float64(f.calls),
				float64(f.allocs)/float64(f.calls), mib(f.peakGo), mib(uint64(f.peakRSS)), f.sum[:8])
			if i == 0 {
				first = f
			} else if f.sum != first.sum {
				return fmt.Errorf("%d services, seed %d: run %d's summary (%d bytes) differs from run 1's (%d bytes)",
					n, c.seed, i+1, f.summaryLen, first.summaryLen)
			}
		}
	}
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%.0fM", float64(b)/(1<<20)) }

func main() {
	c, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "simscale:", err)
		os.Exit(2)
	}
	sim.Main(func(t *testing.T) int {
		if c.cpuprofile != "" {
			var buf bytes.Buffer
			if err := pprof.StartCPUProfile(&buf); err != nil {
				fmt.Fprintln(os.Stderr, "simscale:", err)
				return 1
			}
			defer func() {
				pprof.StopCPUProfile()
				_ = os.WriteFile(c.cpuprofile, buf.Bytes(), 0o644)
			}()
		}
		var progress io.Writer = os.Stderr
		if c.quiet {
			progress = nil
		}
		if err := measure(t, c, os.Stdout, progress); err != nil {
			fmt.Fprintln(os.Stderr, "simscale:", err)
			return 1
		}
		return 0
	})
}
