package main

import (
	"encoding/csv"
	"fmt"
	"html/template"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// result is one run's figures.
type result struct {
	name            string
	calls, ok, lost int
	dbRequests      int
	amplification   float64 // db requests per user call started during the outage
	overall         float64 // db requests per user call, whole run
	goodputDuring   float64 // successful calls/s, of calls started during the outage
	goodputAfter    float64 // successful calls/s, of calls started after it
	p50, p99        time.Duration
	recovery        time.Duration // from the db's return to a steady ≥ 90 % success; <0: never
}

func summarize(name string, cfg config, s *series) result {
	r := result{name: name}
	n := int(cfg.duration / cfg.bucket)
	down, up := int(cfg.down/cfg.bucket), int(cfg.up/cfg.bucket)
	var outageCalls, outageDB, okDuring, okAfter int
	for i := 0; i < len(s.db); i++ {
		r.dbRequests += s.db[i]
		if i >= n {
			continue
		}
		r.calls += s.started[i]
		r.ok += s.ok[i]
		r.lost += s.lost[i]
		switch {
		case i >= down && i < up:
			outageCalls += s.started[i]
			outageDB += s.db[i]
			okDuring += s.okDone[i]
		case i >= up:
			okAfter += s.okDone[i]
		}
	}
	if outageCalls > 0 {
		r.amplification = float64(outageDB) / float64(outageCalls)
	}
	if r.calls > 0 {
		r.overall = float64(r.dbRequests) / float64(r.calls)
	}
	r.goodputDuring = float64(okDuring) / (cfg.up - cfg.down).Seconds()
	r.goodputAfter = float64(okAfter) / (cfg.duration - cfg.up).Seconds()
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	// Recovered: the first bucket from which 1 s of buckets all succeed ≥ 90 %.
	r.recovery = -1
	const steady = 10
	for b := up; b+steady <= n; b++ {
		good := true
		for i := b; i < b+steady; i++ {
			if s.started[i] > 0 && float64(s.ok[i]) < 0.9*float64(s.started[i]) {
				good = false
				break
			}
		}
		if good {
			r.recovery = time.Duration(b-up) * cfg.bucket
			break
		}
	}
	return r
}

func renderTable(rs []result) string {
	var b strings.Builder
	row := func(label string, f func(r result) string) {
		fmt.Fprintf(&b, "%-42s", label)
		for _, r := range rs {
			fmt.Fprintf(&b, "%14s", f(r))
		}
		b.WriteByte('\n')
	}
	row("", func(r result) string { return r.name })
	row("user calls", func(r result) string { return strconv.Itoa(r.calls) })
	row("db requests per user call, during outage", func(r result) string { return fmt.Sprintf("%.2f", r.amplification) })
	row("db requests per user call, whole run", func(r result) string { return fmt.Sprintf("%.2f", r.overall) })
	row("goodput during outage (ok calls/s)", func(r result) string { return fmt.Sprintf("%.1f", r.goodputDuring) })
	row("goodput after outage (ok calls/s)", func(r result) string { return fmt.Sprintf("%.1f", r.goodputAfter) })
	row("user latency p50", func(r result) string { return r.p50.Round(time.Millisecond).String() })
	row("user latency p99", func(r result) string { return r.p99.Round(time.Millisecond).String() })
	row("recovery after the db returns", func(r result) string {
		if r.recovery < 0 {
			return "not in run"
		}
		return r.recovery.String()
	})
	row("calls lost (no answer before the user gave up)", func(r result) string { return strconv.Itoa(r.lost) })
	return b.String()
}

func writeReport(dir string, cfg config, rs []result, ss []*series, table string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "storm.csv"), rs, ss, cfg); err != nil {
		return err
	}
	perSecond := 1 / cfg.bucket.Seconds()
	if err := chart(filepath.Join(dir, "db-requests.png"), "Database requests/s (500 ms mean)", cfg, rs, ss,
		func(s *series, i int) float64 { return float64(s.db[i]) * perSecond }); err != nil {
		return err
	}
	if err := chart(filepath.Join(dir, "goodput.png"), "Successful user calls/s (500 ms mean)", cfg, rs, ss,
		func(s *series, i int) float64 { return float64(s.okDone[i]) * perSecond }); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return page.Execute(f, struct {
		Rate               float64
		Duration, Down, Up time.Duration
		Seed               uint64
		Table              string
	}{cfg.rate, cfg.duration, cfg.down, cfg.up, cfg.seed, table})
}

func writeCSV(path string, rs []result, ss []*series, cfg config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	_ = w.Write([]string{"mode", "t_seconds", "calls_started", "calls_ok", "calls_failed", "calls_lost", "calls_ok_completed", "db_requests"})
	for k, s := range ss {
		for i := range s.db {
			_ = w.Write([]string{rs[k].name, strconv.FormatFloat(float64(i)*cfg.bucket.Seconds(), 'f', 1, 64),
				strconv.Itoa(s.started[i]), strconv.Itoa(s.ok[i]), strconv.Itoa(s.failed[i]), strconv.Itoa(s.lost[i]), strconv.Itoa(s.okDone[i]), strconv.Itoa(s.db[i])})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

var colors = []color.Color{color.RGBA{R: 200, G: 40, B: 40, A: 255}, color.RGBA{R: 30, G: 90, B: 200, A: 255}}

func chart(path, title string, cfg config, rs []result, ss []*series, y func(*series, int) float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = fmt.Sprintf("seconds (database down %.1f–%.1f s)", cfg.down.Seconds(), cfg.up.Seconds())
	p.Add(plotter.NewGrid())
	for k, s := range ss {
		// Each point is the mean of the 5 buckets ending there (500 ms), so the
		// Poisson noise of 100 ms buckets does not hide the shape; storm.csv has the raw
		// series.
		const smooth = 5
		n := int(cfg.duration/cfg.bucket) + 1
		pts := make(plotter.XYs, n)
		for i := range pts {
			var sum float64
			k := 0
			for j := max(0, i-smooth+1); j <= i; j++ {
				sum += y(s, j)
				k++
			}
			pts[i].X = float64(i) * cfg.bucket.Seconds()
			pts[i].Y = sum / float64(k)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = colors[k%len(colors)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(rs[k].name, l)
	}
	p.Legend.Top = true
	return p.Save(9*vg.Inch, 4*vg.Inch, path)
}

var page = template.Must(template.New("storm").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Backstop storm report</title>
<style>body{font:15px system-ui,sans-serif;margin:2em;max-width:64em}pre{background:#f6f6f6;padding:1em}img{max-width:100%}</style>
</head><body>
<h1>Retry storm: naive vs Backstop</h1>
<p>edge → api → data → database on 127.0.0.1; {{printf "%.0f" .Rate}} user calls/s for {{.Duration}};
the database is down from {{.Down}} to {{.Up}}; seed {{.Seed}}.</p>
<pre>{{.Table}}</pre>
<h2>Database requests</h2><img src="db-requests.png" alt="database requests per second, naive vs Backstop">
<h2>Goodput</h2><img src="goodput.png" alt="successful user calls per second, naive vs Backstop">
<p>Per-100 ms series: <a href="storm.csv">storm.csv</a>.</p>
</body></html>
`))
