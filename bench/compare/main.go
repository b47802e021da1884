// Command compare runs the benchmarks of package bench in interleaved rounds — every
// benchmark once per round, -count rounds, one test binary — and prints a Markdown
// table: the median ns/op and allocs/op of each Backstop stack and its ratio to each
// peer measured in the same rounds on the same machine, with B/op, and the parallel
// throughput over serial of each implementation. Run it from the bench folder:
//
//	go run ./compare -count 5
//	go run ./compare -count 5 -cpu 1,2        # each benchmark at GOMAXPROCS 1 and 2
//	go run ./compare -count 5 -json > r.json  # the same figures for a script
//	go run ./compare -count 9 -stat min       # on a loaded machine: each one's fastest round
//
// Backstop's implementations are named Backstop (BackstopShed for the shedder,
// Coalesce for the cache); every other implementation of a stack is a peer.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	count := flag.Int("count", 5, "rounds; each runs every benchmark once")
	benchtime := flag.String("benchtime", "300ms", "-test.benchtime of each run")
	filter := flag.String("bench", ".", "-test.bench pattern")
	cpu := flag.String("cpu", "", "-test.cpu list, e.g. 1,2; empty means GOMAXPROCS as it is")
	asJSON := flag.Bool("json", false, "print JSON instead of Markdown")
	stat := flag.String("stat", "median", "the figure of each benchmark over the rounds: median, or min (its fastest round, "+
		"which other work on a loaded machine disturbs least)")
	flag.Parse()
	if *stat != "median" && *stat != "min" {
		fmt.Fprintf(os.Stderr, "compare: -stat %q: want median or min\n", *stat)
		os.Exit(2)
	}
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "compare: -count must be ≥ 1")
		os.Exit(2)
	}
	if *cpu != "" {
		for _, c := range strings.Split(*cpu, ",") {
			if n, err := strconv.Atoi(c); err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "compare: -cpu %q: want a list of counts ≥ 1, e.g. 1,2\n", *cpu)
				os.Exit(2)
			}
		}
	}
	if err := compare(*count, *benchtime, *filter, *cpu, *stat, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// sample is one benchmark line.
type sample struct{ ns, bytes, allocs float64 }

// line is a benchmark's result; the name ends with -GOMAXPROCS unless that is 1.
var line = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+([\d.]+) allocs/op)?`)

func compare(count int, benchtime, filter, cpu, stat string, asJSON bool) error {
	dir, err := os.MkdirTemp("", "backstop-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the benchmarks: %w", err)
	}
	samples := map[string][]sample{}
	for round := 1; round <= count; round++ {
		fmt.Fprintf(os.Stderr, "round %d/%d\n", round, count)
		var out bytes.Buffer
		args := []string{"-test.run", "^$", "-test.bench", filter, "-test.benchmem", "-test.benchtime", benchtime, "-test.count", "1"}
		if cpu != "" {
			args = append(args, "-test.cpu", cpu)
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("round %d: %w\n%s", round, err, out.String())
		}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			m := line.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			procs := m[2]
			if procs == "" {
				procs = "1"
			}
			ns, _ := strconv.ParseFloat(m[3], 64)
			bytes, _ := strconv.ParseFloat(m[4], 64)
			allocs, _ := strconv.ParseFloat(m[5], 64)
			name := m[1] + "@" + procs
			samples[name] = append(samples[name], sample{ns, bytes, allocs})
		}
	}
	med := map[string]sample{}
	for name, ss := range samples {
		nss := make([]float64, len(ss))
		for i, s := range ss {
			nss[i] = s.ns
		}
		slices.Sort(nss)
		ns := nss[len(nss)/2]
		if stat == "min" {
			ns = nss[0]
		}
		med[name] = sample{ns: ns, bytes: ss[0].bytes, allocs: ss[0].allocs}
	}
	r := summarize(med)
	r.Count, r.Benchtime, r.Stat = count, benchtime, stat
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	r.markdown()
	return nil
}

// result is what compare measured, for Markdown or JSON.
type result struct {
	Count     int       `json:"count"`
	Benchtime string    `json:"benchtime"`
	Stat      string    `json:"stat"` // median or min of the rounds
	Figures   []figure  `json:"figures"`
	Ratios    []ratio   `json:"ratios"`
	Scaling   []scaling `json:"parallel_scaling"`
}

// figure is one implementation's medians.
type figure struct {
	Stack  string  `json:"stack"`
	Impl   string  `json:"impl"`
	Mode   string  `json:"mode"`
	CPU    int     `json:"cpu"`
	Ns     float64 `json:"ns_per_op"`
	Bytes  float64 `json:"bytes_per_op"`
	Allocs float64 `json:"allocs_per_op"`
}

// ratio is Backstop's figure over a peer's, measured in the same rounds.
type ratio struct {
	Stack    string  `json:"stack"`
	Mode     string  `json:"mode"`
	CPU      int     `json:"cpu"`
	Backstop figure  `json:"backstop"`
	Peer     figure  `json:"peer"`
	Ratio    float64 `json:"backstop_over_peer"`
}

// scaling is an implementation's parallel throughput over its serial one.
type scaling struct {
	Stack  string  `json:"stack"`
	Impl   string  `json:"impl"`
	CPU    int     `json:"cpu"`
	Factor float64 `json:"serial_ns_over_parallel_ns"`
}

// ourImpls are the names of Backstop's implementations; the others are peers.
var ourImpls = []string{"Backstop", "BackstopShed", "Coalesce"}

// summarize sorts the medians into figures, Backstop's ratio to each peer of its stack,
// mode and GOMAXPROCS, and each implementation's parallel scaling. Names are
// Stack_Impl/mode@cpu.
func summarize(med map[string]sample) result {
	var r result
	byKey := map[string]figure{}
	for name, s := range med {
		name, procs, _ := strings.Cut(name, "@")
		cpu, _ := strconv.Atoi(procs)
		stackImpl, mode, _ := strings.Cut(name, "/")
		stack, impl, _ := strings.Cut(stackImpl, "_")
		f := figure{Stack: stack, Impl: impl, Mode: mode, CPU: cpu, Ns: s.ns, Bytes: s.bytes, Allocs: s.allocs}
		r.Figures = append(r.Figures, f)
		byKey[fmt.Sprintf("%s_%s/%s@%d", stack, impl, mode, cpu)] = f
	}
	sort.Slice(r.Figures, func(i, j int) bool {
		a, b := r.Figures[i], r.Figures[j]
		switch {
		case a.Stack != b.Stack:
			return a.Stack < b.Stack
		case a.CPU != b.CPU:
			return a.CPU < b.CPU
		case a.Mode != b.Mode:
			return a.Mode > b.Mode // serial before parallel
		}
		return a.Impl < b.Impl
	})
	for _, f := range r.Figures {
		if slices.Contains(ourImpls, f.Impl) {
			continue
		}
		for _, ours := range ourImpls {
			if b, ok := byKey[fmt.Sprintf("%s_%s/%s@%d", f.Stack, ours, f.Mode, f.CPU)]; ok {
				r.Ratios = append(r.Ratios, ratio{Stack: f.Stack, Mode: f.Mode, CPU: f.CPU, Backstop: b, Peer: f, Ratio: b.Ns / f.Ns})
				break
			}
		}
	}
	for _, f := range r.Figures {
		if f.Mode != "serial" {
			continue
		}
		if p, ok := byKey[fmt.Sprintf("%s_%s/parallel@%d", f.Stack, f.Impl, f.CPU)]; ok && p.Ns > 0 {
			r.Scaling = append(r.Scaling, scaling{Stack: f.Stack, Impl: f.Impl, CPU: f.CPU, Factor: f.Ns / p.Ns})
		}
	}
	return r
}

// markdown prints the ratios as a table, then the parallel scaling.
func (r result) markdown() {
	what := "Medians"
	if r.Stat == "min" {
		what = "Fastest"
	}
	fmt.Printf("%s of %d interleaved rounds, -benchtime %s.\n\n", what, r.Count, r.Benchtime)
	fmt.Println("| stack | mode | cpu | Backstop ns/op | B/op | allocs | peer | peer ns/op | peer B/op | peer allocs | Backstop ÷ peer |")
	fmt.Println("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
	for _, x := range r.Ratios {
		fmt.Printf("| %s | %s | %d | %.1f | %.0f | %.0f | %s | %.1f | %.0f | %.0f | %.2f× |\n", x.Stack, x.Mode, x.CPU,
			x.Backstop.Ns, x.Backstop.Bytes, x.Backstop.Allocs, x.Peer.Impl, x.Peer.Ns, x.Peer.Bytes, x.Peer.Allocs, x.Ratio)
	}
	fmt.Println()
	fmt.Println("Parallel throughput over serial (serial ns/op ÷ parallel ns/op, at GOMAXPROCS cpu):")
	fmt.Println()
	for _, x := range r.Scaling {
		fmt.Printf("- %s %s, cpu %d: %.2f×\n", x.Stack, x.Impl, x.CPU, x.Factor)
	}
}
