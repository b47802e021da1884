// Command simscale measures what a simulated call costs as the service graph grows. It
// plays the layered scenario (sim.Layered, Backstop stack, no fault) at each number of
// services with the same load per service, a share of the databases' capacity for the
// same virtual time, so that the calls grow with the services. For each run it prints
// the CPU time (user and system, from getrusage), its CPU per call over the whole run
// and over a steady window (from -warmup to the last arrivals, past the building of the
// services and the heap's growth), bytes and allocations per call, the peak of the Go
// runtime's memory and the process's peak resident set, and a SHA-256 of the run's
// summary.json; then each scale's median steady CPU per call and its ratio to the
// first scale's.
//
//	go run ./sim/cmd/simscale -services 1000,3000,10000 -duration 4s -warmup 2s -runs 3 -max-ratio 1.2
//	go run ./sim/cmd/simscale -services 10000 -duration 94s -runs 1   # 10⁷ calls
//
// The scales take turns, so that each sees neighbours like the others'. Each scale is
// played -runs times with the same seed (default 2), and simscale exits 1 if two of its
// summaries differ in a single byte, or if a scale's median steady CPU per call is
// more than -max-ratio times the first scale's. -cpuprofile writes a CPU profile of
// each scale's first steady window. Progress goes to standard error every 100 ms of
// virtual time. The process's peak resident set only grows: run one scale per process to
// read each scale's own.
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
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
	warmup     time.Duration
	seed       uint64
	runs       int
	maxRatio   float64
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
		warmup     = fs.Duration("warmup", time.Second, "virtual time left out of the steady CPU per call: the building of the services and the heap's growth; unless given, 1s, or half of -duration if less")
		seed       = fs.Uint64("seed", 1, "the seed")
		runs       = fs.Int("runs", 2, "runs of each scale with the same seed, the scales taking turns; their summaries must be the same bytes")
		maxRatio   = fs.Float64("max-ratio", 0, "fail if a scale's median steady CPU per call exceeds the first scale's this many times; 0 means no limit")
		out        = fs.String("out", "", "folder for each scale's summary.json; empty means none")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of each scale's first steady window to this file, the number of services before its extension (cpu.prof: cpu-1000.prof)")
		quiet      = fs.Bool("quiet", false, "no progress on standard error")
	)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["warmup"] {
		*warmup = min(*warmup, *duration/2)
	}
	c := config{load: *load, duration: *duration, warmup: *warmup, seed: *seed, runs: *runs, maxRatio: *maxRatio,
		out: *out, cpuprofile: *cpuprofile, quiet: *quiet}
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
	case c.warmup < 0 || c.warmup >= c.duration:
		return c, fmt.Errorf("-warmup %v: want at least 0 and less than -duration (%v)", c.warmup, c.duration)
	case c.runs < 1:
		return c, fmt.Errorf("-runs %d: want ≥ 1", c.runs)
	case c.maxRatio < 0 || c.maxRatio > 0 && len(c.services) < 2:
		return c, fmt.Errorf("-max-ratio %v: want 0 (none), or more than 0 with at least two -services", c.maxRatio)
	}
	return c, nil
}

// figures are one run's costs.
type figures struct {
	calls      int
	events     uint64
	okShare    float64
	wall, cpu  time.Duration
	steady     float64 // CPU per call from the warm-up's end to the last arrivals, µs
	bytes      uint64  // allocated
	allocs     uint64
	peakGo     uint64 // the runtime's mapped memory, sampled every 100 ms of virtual time
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
//
// Its steady CPU per call leaves out what a run spends once, or in proportion to its
// size rather than its calls: the building of the services, the first touch of each
// one's state and the heap's growth to its working size (the warm-up), and the
// sorting of the latencies and the summary at the end. It is the CPU time (user and
// system, from getrusage: the run's own work, whatever the neighbours do with the
// wall clock) between the progress reports at the warm-up's end and at the last
// arrivals, over the calls started between them.
func play(t *testing.T, c config, n int, first bool, progress io.Writer) (figures, error) {
	sc := sim.Layered(sim.Backstop, n, c.seed, sim.Load{})
	sc.Load = sim.Load{Rate: c.load * sc.Capacity(), Duration: c.duration}
	sc.Bucket = time.Second
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	var f figures
	// Reports every 100 ms of virtual time bound the steady window to within one.
	o := sim.Options{ProgressEvery: 100 * time.Millisecond}
	until := sc.Until().Seconds()
	warm, end := -1, -1 // calls started by the warm-up's end, and by the last arrivals
	var warmCPU, endCPU time.Duration
	var prof *profile
	var profErr error
	if c.cpuprofile != "" && first {
		prof = newProfile(profilePath(c.cpuprofile, n))
		defer prof.close()
	}
	o.Progress = func(v time.Duration, calls int) {
		switch {
		case v >= c.warmup && warm < 0:
			profErr = errors.Join(profErr, prof.start())
			warm, warmCPU = calls, cpuTime()
		case v >= c.duration && end < 0:
			end, endCPU = calls, cpuTime()
			profErr = errors.Join(profErr, prof.stop())
		}
		f.peakGo = max(f.peakGo, goMemory(sample))
		if progress != nil {
			fmt.Fprintf(progress, "\r  %d services: %.1f of ~%.0f s virtual, %d calls ", n, v.Seconds(), until, calls)
		}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	wall, cpu := time.Now(), cpuTime()
	if c.warmup == 0 {
		profErr = prof.start()
		warm, warmCPU = 0, cpu
	}
	s, err := sim.RunWith(t, sc, o)
	if err != nil {
		return f, err
	}
	if err := errors.Join(profErr, prof.stop()); err != nil {
		return f, fmt.Errorf("-cpuprofile: %w", err)
	}
	f.wall, f.cpu = time.Since(wall), cpuTime()-cpu
	runtime.ReadMemStats(&m1)
	f.peakGo = max(f.peakGo, goMemory(sample))
	f.peakRSS = peakRSS()
	if progress != nil {
		fmt.Fprintf(progress, "\r%60s\r", "")
	}
	f.calls, f.events, f.okShare = s.Calls, s.Events, s.OKShare
	if end < 0 { // the run ended with the arrivals: no report at -duration
		end, endCPU = s.Calls, cpu+f.cpu
	}
	if end > warm && warm >= 0 {
		f.steady = float64((endCPU - warmCPU).Nanoseconds()) / 1e3 / float64(end-warm)
	}
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

// measure plays every scale c.runs times, the scales taking turns so that each run
// of one has neighbours like the other's, printing a line per run to w, then each
// scale's median steady CPU per call and its ratio to the first scale's. It fails if
// two runs of a scale differ in a byte of their summaries, or if a ratio exceeds
// c.maxRatio.
func measure(t *testing.T, c config, w, progress io.Writer) error {
	fmt.Fprintf(w, "simscale: layered, backstop, %.0f %% of capacity for %v virtual (steady from %v), seed %d, GOMAXPROCS %d\n",
		c.load*100, c.duration, c.warmup, c.seed, runtime.GOMAXPROCS(0))
	fmt.Fprintln(w, "services  calls     events     ok      wall      cpu       µs cpu/call  steady  B/call  allocs/call  peak Go  peak RSS  summary")
	runs := make([][]figures, len(c.services))
	for i := range c.runs {
		for k, n := range c.services {
			f, err := play(t, c, n, i == 0, progress)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%-9d %-9d %-10d %-7.4f %-9v %-9v %-12.1f %-7.1f %-7.0f %-12.1f %-8s %-9s %x\n",
				n, f.calls, f.events, f.okShare, f.wall.Round(time.Millisecond), f.cpu.Round(time.Millisecond),
				float64(f.cpu.Nanoseconds())/1e3/float64(f.calls), f.steady, float64(f.bytes)/float64(f.calls),
				float64(f.allocs)/float64(f.calls), mib(f.peakGo), mib(uint64(f.peakRSS)), f.sum[:8])
			if i > 0 && f.sum != runs[k][0].sum {
				return fmt.Errorf("%d services, seed %d: run %d's summary (%d bytes) differs from run 1's (%d bytes)",
					n, c.seed, i+1, f.summaryLen, runs[k][0].summaryLen)
			}
			runs[k] = append(runs[k], f)
		}
	}
	return compare(c, runs, w)
}

// compare prints each scale's median steady CPU per call, its spread, and its ratio to
// the first scale's: of the medians, and the median and spread of the ratios of the
// runs made one after the other. It fails if a ratio of medians exceeds c.maxRatio.
func compare(c config, runs [][]figures, w io.Writer) error {
	steady := func(k int) []float64 {
		v := make([]float64, len(runs[k]))
		for i, f := range runs[k] {
			v[i] = f.steady
		}
		return v
	}
	base := steady(0)
	fmt.Fprintln(w, "\nsteady µs cpu/call: median (lowest–highest) over the runs; ratio to the first scale: of the medians, and the median (lowest–highest) of each turn's")
	var over []string
	for k, n := range c.services {
		v := steady(k)
		m := median(v)
		line := fmt.Sprintf("%-9d %.1f (%.1f–%.1f)", n, m, slices.Min(v), slices.Max(v))
		if k > 0 {
			ratio := m / median(base)
			turns := make([]float64, len(v))
			for i := range v {
				turns[i] = v[i] / base[i]
			}
			line += fmt.Sprintf("  ratio %.3f, by turns %.3f (%.3f–%.3f)", ratio, median(turns), slices.Min(turns), slices.Max(turns))
			if c.maxRatio > 0 && ratio > c.maxRatio {
				over = append(over, fmt.Sprintf("%d services: %.3f times %d's", n, ratio, c.services[0]))
			}
		}
		fmt.Fprintln(w, line)
	}
	if len(over) > 0 {
		return fmt.Errorf("steady CPU per call above -max-ratio %v: %s", c.maxRatio, strings.Join(over, "; "))
	}
	return nil
}

// median returns the median of v.
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// profile is a CPU profile of one steady window; a nil *profile does nothing. The
// profiler's goroutine must not belong to the run's synctest bubble (its sleeps would
// be the bubble's, and it would outlive the bubble), so a goroutine outside the bubble
// starts and stops it, on requests from the run's progress reports.
type profile struct {
	path    string
	req     chan bool // true: start, false: stop
	done    chan error
	started bool
}

func newProfile(path string) *profile {
	p := &profile{path: path, req: make(chan bool), done: make(chan error)}
	go func() {
		var buf bytes.Buffer
		for start := range p.req {
			if start {
				p.done <- pprof.StartCPUProfile(&buf)
				continue
			}
			pprof.StopCPUProfile()
			p.done <- os.WriteFile(p.path, buf.Bytes(), 0o644)
			buf.Reset()
		}
	}()
	return p
}

func (p *profile) start() error {
	if p == nil || p.started {
		return nil
	}
	p.req <- true
	err := <-p.done
	p.started = err == nil
	return err
}

// stop ends the profile, if it runs, and writes it.
func (p *profile) stop() error {
	if p == nil || !p.started {
		return nil
	}
	p.started = false
	p.req <- false
	return <-p.done
}

// close ends the profile's goroutine.
func (p *profile) close() {
	if p != nil {
		_ = p.stop()
		close(p.req)
	}
}

// profilePath puts the number of services before path's extension.
func profilePath(path string, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), n, ext)
}

func mib(b uint64) string { return fmt.Sprintf("%.0fM", float64(b)/(1<<20)) }

func main() {
	c, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "simscale:", err)
		os.Exit(2)
	}
	sim.Main(func(t *testing.T) int {
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
