// Command compare runs the benchmarks of package bench in interleaved rounds — every
// benchmark once per round, -count rounds, one test binary — and prints a Markdown
// table: the median ns/op and allocs/op of each Backstop stack and its ratio to each
// peer measured in the same rounds on the same machine. Run it from the bench folder:
//
//	go run ./compare -count 5
package main

import (
	"bufio"
	"bytes"
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
	flag.Parse()
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "compare: -count must be ≥ 1")
		os.Exit(2)
	}
	if err := compare(*count, *benchtime, *filter); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// sample is one benchmark line.
type sample struct{ ns, allocs float64 }

var line = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.]+ B/op\s+([\d.]+) allocs/op)?`)

func compare(count int, benchtime, filter string) error {
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
		cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", filter, "-test.benchmem", "-test.benchtime", benchtime, "-test.count", "1")
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
			ns, _ := strconv.ParseFloat(m[2], 64)
			allocs, _ := strconv.ParseFloat(m[3], 64)
			samples[m[1]] = append(samples[m[1]], sample{ns, allocs})
		}
	}
	med := map[string]sample{}
	for name, ss := range samples {
		nss := make([]float64, len(ss))
		for i, s := range ss {
			nss[i] = s.ns
		}
		slices.Sort(nss)
		med[name] = sample{ns: nss[len(nss)/2], allocs: ss[0].allocs}
	}
	report(med, count, benchtime)
	return nil
}

// report prints, per group and mode, Backstop's figures and its ratio to each peer.
// Names are Group_Impl/mode.
func report(med map[string]sample, count int, benchtime string) {
	type key struct{ group, mode string }
	impls := map[key][]string{}
	var keys []key
	for name := range med {
		groupImpl, mode, _ := strings.Cut(name, "/")
		group, impl, _ := strings.Cut(groupImpl, "_")
		k := key{group, mode}
		if _, ok := impls[k]; !ok {
			keys = append(keys, k)
		}
		impls[k] = append(impls[k], impl)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].mode > keys[j].mode // serial before parallel
	})
	fmt.Printf("Medians of %d interleaved rounds, -benchtime %s.\n\n", count, benchtime)
	fmt.Println("| stack | mode | Backstop ns/op | allocs | peer | peer ns/op | peer allocs | Backstop ÷ peer |")
	fmt.Println("|---|---|---:|---:|---|---:|---:|---:|")
	for _, k := range keys {
		ours, ok := med[k.group+"_Backstop/"+k.mode]
		name := "Backstop"
		if !ok {
			if ours, ok = med[k.group+"_BackstopShed/"+k.mode]; !ok {
				continue
			}
			name = "BackstopShed"
		}
		peers := impls[k]
		sort.Strings(peers)
		for _, peer := range peers {
			if peer == name {
				continue
			}
			p := med[k.group+"_"+peer+"/"+k.mode]
			fmt.Printf("| %s | %s | %.1f | %.0f | %s | %.1f | %.0f | %.2f× |\n",
				k.group, k.mode, ours.ns, ours.allocs, peer, p.ns, p.allocs, ours.ns/p.ns)
		}
	}
	fmt.Println()
	fmt.Println("Parallel throughput over serial (serial ns/op ÷ parallel ns/op, 2 goroutines on 2 cores):")
	fmt.Println()
	for _, k := range keys {
		if k.mode != "serial" {
			continue
		}
		for _, impl := range impls[k] {
			s, p := med[k.group+"_"+impl+"/serial"], med[k.group+"_"+impl+"/parallel"]
			if p.ns > 0 {
				fmt.Printf("- %s %s: %.2f×\n", k.group, impl, s.ns/p.ns)
			}
		}
	}
}
