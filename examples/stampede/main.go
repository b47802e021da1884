// Command stampede puts a hot key in front of a loopback origin of fixed capacity and
// sends steady load through two caches in turn: a plain TTL cache, whose every reader
// that finds the key expired goes to the origin (the stampede), and Backstop's
// coalesce, which serves the stale value while one request refreshes it. It prints the
// origin's requests per expiry and how fast the readers were answered, and charts the
// origin's requests per 100 ms for both (stampede-report/origin.png).
package main

import (
	"context"
	"flag"
	"fmt"
	"image/color"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/policy"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/coalesce"
	"github.com/backstop-go/backstop/examples/internal/plotticks"
)

const (
	originWorkers = 4
	originWork    = 20 * time.Millisecond // 200 requests/s
	ttl           = time.Second
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "how long each cache is loaded")
	readers := flag.Int("readers", 50, "concurrent readers of the hot key")
	out := flag.String("out", "stampede-report", "folder for the chart")
	flag.Parse()
	if err := run(*duration, *readers, *out); err != nil {
		fmt.Fprintln(os.Stderr, "stampede:", err)
		os.Exit(1)
	}
}

// origin is a loopback HTTP server that serves originWorkers requests at a time.
type origin struct {
	url      string
	srv      *http.Server
	mu       sync.Mutex
	arrivals []time.Time
}

func startOrigin() (*origin, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &origin{url: "http://" + ln.Addr().String()}
	sem := make(chan struct{}, originWorkers)
	o.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.arrivals = append(o.arrivals, time.Now())
		o.mu.Unlock()
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(originWork)
		<-sem
		_, _ = io.WriteString(w, "the hot value")
	})}
	go o.srv.Serve(ln) //nolint:errcheck // ends with Close
	return o, nil
}

// plain is a TTL cache without coalescing: a reader that finds the value expired
// loads it itself.
type plain struct {
	mu      sync.Mutex
	value   string
	expires time.Time
	load    func(context.Context) (string, error)
}

func (p *plain) Get(ctx context.Context) (string, error) {
	p.mu.Lock()
	v, fresh := p.value, time.Now().Before(p.expires)
	p.mu.Unlock()
	if fresh {
		return v, nil
	}
	v, err := p.load(ctx)
	if err == nil {
		p.mu.Lock()
		p.value, p.expires = v, time.Now().Add(ttl)
		p.mu.Unlock()
	}
	return v, err
}

type result struct {
	name            string
	originRequests  int
	peak            int // most origin requests in 100 ms, as per second
	reads           int64
	p50, p99        time.Duration
	errors          int64
	perExpiryOrigin float64
	series          []float64 // origin requests per second, per 100 ms of the run
}

func load(name string, d time.Duration, readers int, get func(context.Context) (string, error), o *origin) result {
	o.mu.Lock()
	o.arrivals = nil
	o.mu.Unlock()
	var reads, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Since(start) < d {
				t := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := get(ctx)
				cancel()
				mine = append(mine, time.Since(t))
				reads.Add(1)
				if err != nil {
					errs.Add(1)
				}
				time.Sleep(100 * time.Millisecond) // each reader: about 10 reads/s
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	o.mu.Lock()
	arrivals := slices.Clone(o.arrivals)
	o.mu.Unlock()
	buckets := map[int64]int{}
	for _, a := range arrivals {
		buckets[int64(a.Sub(start)/(100*time.Millisecond))]++
	}
	peak := 0
	for _, n := range buckets {
		peak = max(peak, n)
	}
	slices.Sort(lat)
	r := result{name: name, originRequests: len(arrivals), peak: peak * 10, reads: reads.Load(), errors: errs.Load()}
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	r.perExpiryOrigin = float64(len(arrivals)) / (d.Seconds() / ttl.Seconds())
	r.series = make([]float64, int(d/(100*time.Millisecond))+1)
	for i := range r.series {
		r.series[i] = float64(buckets[int64(i)]) * 10
	}
	return r
}

func run(d time.Duration, readers int, out string) error {
	o, err := startOrigin()
	if err != nil {
		return err
	}
	defer o.srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	fetch := func(ctx context.Context) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", o.url, nil)
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	fmt.Printf("stampede: one hot key, TTL %v, %d readers at ~10 reads/s each, an origin of %d requests/s, %v per cache\n\n",
		ttl, readers, originWorkers*int(time.Second/originWork), d)

	p := &plain{load: fetch}
	naive := load("plain TTL", d, readers, p.Get, o)

	c := policy.Must(coalesce.New(coalesce.Options[string, string]{
		Load: func(ctx context.Context, _ string) (string, error) { return fetch(ctx) },
		TTL:  ttl, StaleWhileRefresh: ttl,
	}))
	defer c.Close()
	co := load("coalesce", d, readers, func(ctx context.Context) (string, error) { return c.Get(ctx, "hot") }, o)

	fmt.Printf("%-12s %16s %18s %20s %10s %18s %7s\n", "cache", "origin requests", "per expiry (mean)", "origin peak (req/s)", "reads", "read p50 / p99", "errors")
	for _, r := range []result{naive, co} {
		fmt.Printf("%-12s %16d %18.1f %20d %10d %18s %7d\n", r.name, r.originRequests, r.perExpiryOrigin, r.peak, r.reads,
			r.p50.Round(time.Microsecond).String()+" / "+r.p99.Round(time.Microsecond).String(), r.errors)
	}
	if err := chart(out, []result{naive, co}); err != nil {
		return err
	}
	fmt.Printf("\nchart: %s/origin.png\n", out)
	fmt.Printf("stampede: origin requests per expiry: plain %.1f, coalesce %.1f\n", naive.perExpiryOrigin, co.perExpiryOrigin)
	if co.originRequests > naive.originRequests {
		return fmt.Errorf("coalesce sent the origin %d requests, the plain cache %d", co.originRequests, naive.originRequests)
	}
	return nil
}

// chart draws the origin's requests per second over each run, with its capacity.
func chart(dir string, rs []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Origin requests per second (100 ms buckets), one hot key with a 1 s TTL"
	p.X.Label.Text = "time since the run started (s)"
	p.Y.Label.Text = "origin requests per second"
	p.X.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
	p.Y.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
	p.Add(plotter.NewGrid())
	capacity := float64(originWorkers * int(time.Second/originWork))
	top := capacity
	colors := []color.Color{color.RGBA{R: 200, G: 40, B: 40, A: 255}, color.RGBA{R: 30, G: 90, B: 200, A: 255}}
	for k, r := range rs {
		pts := make(plotter.XYs, len(r.series))
		for i, v := range r.series {
			pts[i].X, pts[i].Y = float64(i)/10, v
			top = max(top, v)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Width = colors[k%len(colors)], vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.name, l)
	}
	c, err := plotter.NewLine(plotter.XYs{{X: 0, Y: capacity}, {X: float64(len(rs[0].series)) / 10, Y: capacity}})
	if err != nil {
		return err
	}
	c.Color, c.Dashes = color.Black, []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(c)
	p.Legend.Add(fmt.Sprintf("origin capacity (%.0f/s)", capacity), c)
	p.Y.Min, p.Y.Max = 0, top*1.4
	p.Legend.Top = true
	return p.Save(9*vg.Inch, 4*vg.Inch, filepath.Join(dir, "origin.png"))
}
