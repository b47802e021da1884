// Command herd reproduces Marc Brooker's simulation from "Exponential Backoff and
// Jitter" (AWS Architecture Blog, 2015) with Backstop's own backoff strategies, under
// his model: N clients each update one database row once with optimistic concurrency
// control. A client reads the row's version, then writes it back conditionally; a
// write whose version is stale fails, and the client backs off, then reads again.
// Every message crosses a network whose delay is |Normal(10 ms, 2 ms)|. It runs on a
// virtual clock, so thousands of simulated seconds take a moment, and prints the work
// (writes) and the completion time of each strategy, its ranking, and whether the
// ranking matches the one Brooker published.
package main

import (
	"container/heap"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/examples/internal/plotticks"

	"github.com/backstop-go/backstop/retry"
)

// Brooker's constants: base 5 ms, cap 2 s, network delay |Normal(10 ms, 2 ms)| each way.
const (
	base     = 5 * time.Millisecond
	cap_     = 2 * time.Second
	netMean  = 10 * time.Millisecond
	netSigma = 2 * time.Millisecond
)

// noBackoff retries at once: Brooker's "No backoff".
type noBackoff struct{}

func (noBackoff) Delay(int, time.Duration, time.Duration, time.Duration, jitter.Rand) time.Duration {
	return 0
}

var strategies = []struct {
	name string
	s    retry.Strategy
}{
	{"No backoff", noBackoff{}},
	{"Exponential", retry.None{}}, // capped exponential, no jitter
	{"Equal", retry.Equal{}},
	{"Full", retry.Full{}},
	{"Decorrelated", retry.Decorrelated{}},
	{"GRPC", retry.GRPC{}},
}

// The strategies Brooker compared, by index in strategies.
const (
	sNone, sExpo, sEqual, sFull, sDecorr = 0, 1, 2, 3, 4
)

func main() {
	var (
		from = flag.Int("min", 10, "fewest clients")
		to   = flag.Int("max", 190, "most clients")
		step = flag.Int("step", 10, "clients added per point")
		runs = flag.Int("runs", 100, "simulations averaged per point (Brooker: 100)")
		seed = flag.Uint64("seed", 1, "random seed")
		out  = flag.String("out", "herd-report", "folder for herd.csv and the charts")
	)
	flag.Parse()
	if *from < 1 || *to < *from || *step < 1 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "herd: want 1 ≤ -min ≤ -max, -step ≥ 1, -runs ≥ 1")
		os.Exit(2)
	}
	if err := herd(*from, *to, *step, *runs, *seed, *out); err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}

// point is the mean of one strategy's runs at one number of clients.
type point struct {
	clients int
	calls   float64       // writes, failed and successful: the work
	done    time.Duration // when the last client's update succeeded
}

func herd(from, to, step, runs int, seed uint64, out string) error {
	results := make([][]point, len(strategies))
	work := make([]float64, len(strategies))           // sum over points of mean writes
	meanTime := make([]time.Duration, len(strategies)) // mean over points of mean completion
	var counts []int
	for n := from; n <= to; n += step {
		counts = append(counts, n)
		for k, st := range strategies {
			var calls int
			var done time.Duration
			for r := range runs {
				rnd := rand.New(rand.NewPCG(seed, uint64(n)<<20|uint64(r)<<4|uint64(k)))
				c, d := simulate(n, st.s, rnd)
				calls += c
				done += d
			}
			p := point{clients: n, calls: float64(calls) / float64(runs), done: done / time.Duration(runs)}
			results[k] = append(results[k], p)
			work[k] += p.calls
			meanTime[k] += p.done
		}
	}
	for k := range meanTime {
		meanTime[k] /= time.Duration(len(counts))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(out, "herd.csv"), results); err != nil {
		return err
	}
	if err := chart(filepath.Join(out, "calls.png"), "Work: writes until every client has updated the row (log scale)",
		"writes (mean of the runs)", results, func(p point) float64 { return p.calls }); err != nil {
		return err
	}
	if err := chart(filepath.Join(out, "completion.png"), "Time until every client has updated the row (log scale)",
		"completion time (ms, mean of the runs)", results, func(p point) float64 { return float64(p.done) / float64(time.Millisecond) }); err != nil {
		return err
	}

	fmt.Printf("herd: OCC, %d–%d clients, step %d, %d runs per point, network |Normal(10 ms, 2 ms)|, base 5 ms, cap 2 s, seed %d\n\n",
		from, to, step, runs, seed)
	fmt.Println("mean completion time (ms) per client count:")
	fmt.Printf("%8s", "clients")
	for _, st := range strategies {
		fmt.Printf("%14s", st.name)
	}
	fmt.Println()
	for i, n := range counts {
		fmt.Printf("%8d", n)
		for k := range strategies {
			fmt.Printf("%14.1f", float64(results[k][i].done)/float64(time.Millisecond))
		}
		fmt.Println()
	}
	fmt.Printf("\n%-14s %16s %24s\n", "strategy", "work (writes)", "mean completion (ms)")
	for k, st := range strategies {
		fmt.Printf("%-14s %16.0f %24.1f\n", st.name, work[k], float64(meanTime[k])/float64(time.Millisecond))
	}

	byWork := rank(len(strategies), func(k int) float64 { return work[k] })
	byTime := rank(len(strategies), func(k int) float64 { return float64(meanTime[k]) })
	names := func(ks []int) string {
		var ss []string
		for _, k := range ks {
			ss = append(ss, strategies[k].name)
		}
		return strings.Join(ss, " < ")
	}
	fmt.Printf("\nranking by work: %s\nranking by time: %s\n", names(byWork), names(byTime))

	// Brooker's findings, each checked on Brooker's strategies.
	jittered := []int{sEqual, sFull, sDecorr}
	checks := []struct {
		claim string
		holds bool
	}{
		{"every jittered strategy does less work than no backoff and than un-jittered exponential backoff",
			all(jittered, func(k int) bool { return work[k] < work[sNone] && work[k] < work[sExpo] })},
		{"Full jitter does the least work", all([]int{sNone, sExpo, sEqual, sDecorr}, func(k int) bool { return work[sFull] < work[k] })},
		{"Decorrelated jitter finishes sooner than Full jitter", meanTime[sDecorr] < meanTime[sFull]},
		{"Equal jitter is the slowest of the jittered strategies", meanTime[sEqual] > meanTime[sFull] && meanTime[sEqual] > meanTime[sDecorr]},
	}
	matches := true
	for _, c := range checks {
		mark := "yes"
		if !c.holds {
			mark, matches = "NO", false
		}
		fmt.Printf("  %-3s %s\n", mark, c.claim)
	}
	verdict := "matches Brooker's"
	if !matches {
		verdict = "does not match Brooker's in every point (see above and examples/README.md)"
	}
	fmt.Printf("herd: the ranking %s\n", verdict)
	fmt.Printf("herd: least work: %s; fastest: %s\n", strategies[byWork[0]].name, strategies[byTime[0]].name)
	fmt.Printf("report: %s/herd.csv, calls.png, completion.png\n", out)
	return nil
}

func rank(n int, key func(int) float64) []int {
	ks := make([]int, n)
	for i := range ks {
		ks[i] = i
	}
	slices.SortStableFunc(ks, func(a, b int) int {
		switch ka, kb := key(a), key(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return ks
}

func all(ks []int, f func(int) bool) bool {
	for _, k := range ks {
		if !f(k) {
			return false
		}
	}
	return true
}

// The messages of the simulation, in the order a client sends them.
const (
	readArrives  = iota // a read reaches the server
	readReturns         // its reply (the version) reaches the client
	writeArrives        // a conditional write reaches the server
	writeReturns        // its reply (success or not) reaches the client
)

// simulate runs n clients against one OCC row and returns the writes made and when
// the last client's update succeeded. Messages are events on a virtual clock; at
// equal times the earlier-sent one goes first, so a run is a function of its seed.
func simulate(n int, s retry.Strategy, r *rand.Rand) (writes int, done time.Duration) {
	delay := func() time.Duration {
		return time.Duration(math.Abs(r.NormFloat64()*float64(netSigma) + float64(netMean)))
	}
	type client struct {
		attempt int           // failed writes so far
		prev    time.Duration // the last backoff, for Decorrelated
		version int           // the version its last read saw
	}
	clients := make([]client, n)
	var version int // the row's
	q := make(events, 0, n)
	var seq int
	push := func(at time.Duration, c, kind int, v int) {
		seq++
		heap.Push(&q, event{at: at, seq: seq, client: c, kind: kind, version: v})
	}
	for c := range n {
		push(delay(), c, readArrives, 0)
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		cl := &clients[e.client]
		switch e.kind {
		case readArrives:
			push(e.at+delay(), e.client, readReturns, version)
		case readReturns:
			cl.version = e.version
			push(e.at+delay(), e.client, writeArrives, e.version)
		case writeArrives:
			writes++
			ok := e.version == version
			if ok {
				version++
			}
			push(e.at+delay(), e.client, writeReturns, map[bool]int{true: 1, false: 0}[ok])
		case writeReturns:
			if e.version == 1 { // success
				done = max(done, e.at)
				continue
			}
			cl.attempt++
			// Brooker's window after the n-th failure is base·2^n; Backstop's
			// strategies count from base·2^(n−1), so retry n+1 has his window.
			d := s.Delay(cl.attempt+1, cl.prev, base, cap_, r)
			cl.prev = d
			push(e.at+delay()+d, e.client, readArrives, 0)
		}
	}
	return writes, done
}

type event struct {
	at      time.Duration
	seq     int // order of sending, to break ties
	client  int
	kind    int
	version int // the version read or written; for writeReturns, 1 if it succeeded
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func writeCSV(path string, results [][]point) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	_ = w.Write([]string{"clients", "strategy", "writes", "completion_ms"})
	for k, ps := range results {
		for _, p := range ps {
			_ = w.Write([]string{strconv.Itoa(p.clients), strategies[k].name, strconv.FormatFloat(p.calls, 'f', 1, 64),
				strconv.FormatFloat(float64(p.done)/float64(time.Millisecond), 'f', 1, 64)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

var palette = []color.Color{
	color.RGBA{R: 120, G: 120, B: 120, A: 255},
	color.RGBA{R: 0, G: 0, B: 0, A: 255},
	color.RGBA{R: 230, G: 140, B: 20, A: 255},
	color.RGBA{R: 30, G: 90, B: 200, A: 255},
	color.RGBA{R: 40, G: 160, B: 60, A: 255},
	color.RGBA{R: 200, G: 40, B: 40, A: 255},
}

// chart draws one line per strategy against the number of clients, on a log scale so
// that no backoff's N² does not flatten the others.
func chart(path, title, ylabel string, results [][]point, y func(point) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients"
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plotticks.Plain(plot.LogTicks{Prec: -1})
	p.X.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
	p.Add(plotter.NewGrid())
	top, bottom := 0.0, math.Inf(1)
	for k, ps := range results {
		xys := make(plotter.XYs, len(ps))
		for i, pt := range ps {
			xys[i].X, xys[i].Y = float64(pt.clients), math.Max(y(pt), 1)
			top, bottom = math.Max(top, xys[i].Y), math.Min(bottom, xys[i].Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = palette[k%len(palette)]
		l.Width = vg.Points(1.5)
		if k == sExpo {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(strategies[k].name, l)
	}
	p.Y.Min, p.Y.Max = bottom/2, top*20 // headroom above the lines for the legend
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
