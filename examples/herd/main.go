// Command herd reproduces Marc Brooker's simulation from "Exponential Backoff and
// Jitter" (AWS Architecture Blog) with Backstop's own backoff strategies: N clients
// each write once to a resource that admits one writer at a time; a client that finds
// it busy backs off and tries again. It runs on a virtual clock, so thousands of
// simulated seconds take a moment, and prints which strategy did the least work and
// which finished fastest.
package main

import (
	"container/heap"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The simulation's constants, after Brooker: base 5 ms, cap 2 s, and a write that
// holds the resource for 1 ms.
const (
	base  = 5 * time.Millisecond
	cap_  = 2 * time.Second
	write = time.Millisecond
)

var strategies = []struct {
	name string
	s    retry.Strategy
}{
	{"None", retry.None{}},
	{"Equal", retry.Equal{}},
	{"Full", retry.Full{}},
	{"Decorrelated", retry.Decorrelated{}},
	{"GRPC", retry.GRPC{}},
}

func main() {
	var (
		from = flag.Int("min", 10, "fewest clients")
		to   = flag.Int("max", 190, "most clients")
		step = flag.Int("step", 10, "clients added per point")
		runs = flag.Int("runs", 20, "simulations averaged per point")
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
	calls   float64
	done    time.Duration
}

func herd(from, to, step, runs int, seed uint64, out string) error {
	results := make([][]point, len(strategies))
	totalCalls := make([]float64, len(strategies))
	totalTime := make([]time.Duration, len(strategies))
	for n := from; n <= to; n += step {
		for k, st := range strategies {
			var calls int
			var done time.Duration
			for r := range runs {
				rnd := rand.New(rand.NewPCG(seed, uint64(n)<<16|uint64(r)))
				c, d := simulate(n, st.s, rnd)
				calls += c
				done += d
			}
			p := point{clients: n, calls: float64(calls) / float64(runs), done: done / time.Duration(runs)}
			results[k] = append(results[k], p)
			totalCalls[k] += p.calls
			totalTime[k] += p.done
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(out, "herd.csv"), results); err != nil {
		return err
	}
	if err := chart(filepath.Join(out, "calls.png"), "Total calls until every client has written", "calls", results,
		func(p point) float64 { return p.calls }); err != nil {
		return err
	}
	if err := chart(filepath.Join(out, "completion.png"), "Time until every client has written", "milliseconds", results,
		func(p point) float64 { return float64(p.done) / float64(time.Millisecond) }); err != nil {
		return err
	}
	fmt.Printf("herd: %d–%d clients, step %d, %d runs each, seed %d\n\n", from, to, step, runs, seed)
	fmt.Printf("%-14s %16s %18s\n", "strategy", "calls (sum)", "completion (sum)")
	least, fastest := 0, 0
	for k, st := range strategies {
		fmt.Printf("%-14s %16.0f %18v\n", st.name, totalCalls[k], totalTime[k].Round(time.Millisecond))
		if totalCalls[k] < totalCalls[least] {
			least = k
		}
		if totalTime[k] < totalTime[fastest] {
			fastest = k
		}
	}
	fmt.Printf("\nherd: least work: %s; fastest: %s\n", strategies[least].name, strategies[fastest].name)
	fmt.Printf("report: %s/herd.csv, calls.png, completion.png\n", out)
	return nil
}

// simulate runs n clients against the one-writer resource and returns the calls made
// and when the last client succeeded. Attempts are events on a virtual clock; at equal
// times the lower-numbered client goes first, so a run is a function of its seed.
func simulate(n int, s retry.Strategy, r policy.Rand) (calls int, done time.Duration) {
	q := make(events, 0, n)
	for c := range n {
		q = append(q, event{at: 0, client: c, attempt: 1})
	}
	heap.Init(&q)
	var busyUntil time.Duration
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		calls++
		if e.at >= busyUntil {
			busyUntil = e.at + write
			done = max(done, busyUntil)
			continue
		}
		d := s.Delay(e.attempt, e.prev, base, cap_, r)
		heap.Push(&q, event{at: e.at + d, client: e.client, attempt: e.attempt + 1, prev: d})
	}
	return calls, done
}

type event struct {
	at      time.Duration
	client  int
	attempt int
	prev    time.Duration
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].client < q[j].client
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
	_ = w.Write([]string{"clients", "strategy", "total_calls", "completion_ms"})
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
	color.RGBA{R: 230, G: 140, B: 20, A: 255},
	color.RGBA{R: 30, G: 90, B: 200, A: 255},
	color.RGBA{R: 40, G: 160, B: 60, A: 255},
	color.RGBA{R: 200, G: 40, B: 40, A: 255},
}

func chart(path, title, ylabel string, results [][]point, y func(point) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "clients"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	for k, ps := range results {
		xys := make(plotter.XYs, len(ps))
		for i, pt := range ps {
			xys[i].X, xys[i].Y = float64(pt.clients), y(pt)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = palette[k%len(palette)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(strategies[k].name, l)
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
