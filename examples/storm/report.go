package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/examples/internal/plotticks"
	"github.com/backstop-go/backstop/sim"
)

// result is one mode's figures.
type result struct {
	name                    string
	calls, ok, failed, lost int
	dbRequests              int
	peakDB                  int     // the most database requests in one second
	peakQueries             int     // the most queries the database ran in one second
	amplification           float64 // db requests per user call started during the outage
	overall                 float64 // db requests per user call, whole run
	goodputDuring           float64 // successful calls/s, of calls started during the outage
	goodputAfter            float64 // successful calls/s, of calls started after it
	p50, p99                time.Duration
	failedP50, failedP99    time.Duration // how fast failures were answered
	recovery                time.Duration // from the db's return to a steady ≥ 90 % success; <0: never
	recoveryStrict          time.Duration // from the db's return to the first call after which every call for 1 s was ok; <0: never
	probe                   int           // db requests for one user action, db down
	suppressedOwner, budget int64
	breakerRefused, shedded int64
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*p/100)]
}

func summarize(name string, cfg config, s *series) result {
	r := result{name: name}
	n := int(cfg.duration / cfg.bucket)
	down, up := int(cfg.down/cfg.bucket), int(cfg.up/cfg.bucket)
	var outageCalls, outageDB, okDuring, okAfter int
	perSecond := int(time.Second / cfg.bucket)
	for i := 0; i < len(s.db); i++ {
		r.dbRequests += s.db[i]
		window, ran := 0, 0
		for j := i; j < min(i+perSecond, len(s.db)); j++ {
			window += s.db[j]
			ran += s.queries[j]
		}
		r.peakDB, r.peakQueries = max(r.peakDB, window), max(r.peakQueries, ran)
		if i >= n {
			continue
		}
		r.calls += s.started[i]
		r.ok += s.ok[i]
		r.failed += s.failed[i]
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
	r.p50, r.p99 = percentile(s.lat, 50), percentile(s.lat, 99)
	r.failedP50, r.failedP99 = percentile(s.failedLat, 50), percentile(s.failedLat, 99)
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
	s.mu.Lock()
	calls := slices.Clone(s.calls)
	s.mu.Unlock()
	slices.SortStableFunc(calls, func(a, b sim.CallAt) int { return cmp.Compare(a.At, b.At) })
	r.recoveryStrict = sim.RecoveryStrict(calls, cfg.up, sim.StrictWindow) // the simulator's definition
	r.suppressedOwner = s.events.suppressedOwner.Load()
	r.budget = s.events.refusedBudget.Load()
	r.breakerRefused = s.events.refusedBreaker.Load()
	r.shedded = s.events.shed.Load()
	return r
}

// renderLoad states the load the runs were under.
func renderLoad(cfg config, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "load: %.0f user calls/s; the database serves %d requests/s (%d at a time, %v each)\n",
		cfg.rate, dbCapacity, dbWorkers, dbWork)
	if cfg.contend > 0 {
		fmt.Fprintf(&b, "      under CPU contention: %d busy goroutines beside the storm\n", cfg.contend)
	}
	for _, r := range rs {
		fmt.Fprintf(&b, "      %-10s peak offered load on the database %5d requests/s = %5.1f × its capacity\n",
			r.name, r.peakDB, float64(r.peakDB)/float64(dbCapacity))
	}
	if cfg.contend > 0 {
		// Under contention a query still holds its worker for 25 ms of wall time (the
		// database's pool is not this process's CPUs): the database keeps its capacity.
		ran := 0
		for _, r := range rs {
			ran = max(ran, r.peakQueries)
		}
		fmt.Fprintf(&b, "      the database ran at most %d queries/s in any second of any run (its capacity: %d/s;\n"+
			"      contention delays the services and the answers, not the database's queries)\n", ran, dbCapacity)
	}
	fmt.Fprintf(&b, "      the user gives up after %v: that truncates the naive stack's amplification in the\n"+
		"      averages below (an abandoned call stops retrying); the probe row has no such limit\n", userTimeout)
	return b.String()
}

// renderTable prints every mode's figures, columns aligned for every label.
func renderTable(rs []result) string {
	type row struct {
		label string
		f     func(r result) string
	}
	ms := func(d time.Duration) string {
		if d >= time.Second {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(time.Millisecond).String()
	}
	rows := []row{
		{"", func(r result) string { return r.name }},
		{"user calls", func(r result) string { return strconv.Itoa(r.calls) }},
		{"  answered ok", func(r result) string { return strconv.Itoa(r.ok) }},
		{"  answered with an error", func(r result) string { return strconv.Itoa(r.failed) }},
		{"  lost (no answer before the user gave up)", func(r result) string { return strconv.Itoa(r.lost) }},
		{"  ok + error + lost = user calls", func(r result) string {
			return map[bool]string{true: "yes", false: "NO"}[r.ok+r.failed+r.lost == r.calls]
		}},
		{"database requests for one user action, database down", func(r result) string {
			if r.probe < 0 {
				return "—"
			}
			return strconv.Itoa(r.probe)
		}},
		{"database requests per user call, during the outage", func(r result) string { return fmt.Sprintf("%.2f", r.amplification) }},
		{"database requests per user call, whole run", func(r result) string { return fmt.Sprintf("%.2f", r.overall) }},
		{"goodput during the outage (ok calls/s)", func(r result) string { return fmt.Sprintf("%.1f", r.goodputDuring) }},
		{"goodput after the outage (ok calls/s)", func(r result) string { return fmt.Sprintf("%.1f", r.goodputAfter) }},
		{"user latency p50 / p99, every call", func(r result) string { return ms(r.p50) + " / " + ms(r.p99) }},
		{"user latency p50 / p99, calls answered with an error", func(r result) string {
			if r.failed == 0 {
				return "—"
			}
			return ms(r.failedP50) + " / " + ms(r.failedP99)
		}},
		{"recovery after the database returns", func(r result) string {
			if r.recovery < 0 {
				return "never (within the run)"
			}
			return r.recovery.String()
		}},
		{"recovery to the call (all ok for 1 s)", func(r result) string {
			if r.recoveryStrict < 0 {
				return "never (within the run)"
			}
			return r.recoveryStrict.Round(time.Millisecond).String()
		}},
		{"retries suppressed by the owner rule", func(r result) string { return strconv.FormatInt(r.suppressedOwner, 10) }},
		{"retries refused by a budget", func(r result) string { return strconv.FormatInt(r.budget, 10) }},
		{"calls refused by an open breaker", func(r result) string { return strconv.FormatInt(r.breakerRefused, 10) }},
		{"requests shed (429/503 with Retry-After)", func(r result) string { return strconv.FormatInt(r.shedded, 10) }},
	}
	width := 0
	for _, rw := range rows {
		width = max(width, len([]rune(rw.label)))
	}
	cols := make([]int, len(rs))
	for k, r := range rs {
		for _, rw := range rows {
			cols[k] = max(cols[k], len([]rune(rw.f(r))))
		}
	}
	var b strings.Builder
	for _, rw := range rows {
		b.WriteString(rw.label)
		b.WriteString(strings.Repeat(" ", width-len([]rune(rw.label))))
		for k, r := range rs {
			v := rw.f(r)
			b.WriteString(strings.Repeat(" ", 3+cols[k]-len([]rune(v))))
			b.WriteString(v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// renderTrade says, for each mode against the owner rule alone, what its protections
// cost and what they bought: answers, load on the database, and how fast failures are
// answered.
func renderTrade(rs []result) string {
	var owner result
	for _, r := range rs {
		if r.name == modeOwnerOnly.String() {
			owner = r
		}
	}
	var b strings.Builder
	b.WriteString("what each stack cost and bought, against the owner rule alone (owner_only):\n")
	for _, r := range rs {
		if r.name == owner.name {
			continue
		}
		fmt.Fprintf(&b, "  %-9s answered ok %d vs %d (%+d, %.1f %%); database requests per call in the outage %.2f vs %.2f;\n",
			r.name, r.ok, owner.ok, r.ok-owner.ok, 100*float64(r.ok)/math.Max(1, float64(owner.ok)), r.amplification, owner.amplification)
		fmt.Fprintf(&b, "  %-9s failures answered in %s vs %s; %d lost (the user gave up first)",
			"", failedLatency(r), failedLatency(owner), r.lost)
		if r.breakerRefused+r.shedded+r.budget > 0 {
			fmt.Fprintf(&b, ";\n  %-9s refused fast: %d calls at an open breaker, %d requests by a shedder\n  %-9s (its breaker gate included), %d retries by a budget",
				"", r.breakerRefused, r.shedded, "", r.budget)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// failedLatency says how fast a mode answered its failures, "none failed" if it
// answered none: 0 s would read as instant.
func failedLatency(r result) string {
	if r.failed == 0 {
		return "none failed"
	}
	return fmt.Sprintf("%v p50 / %v p99", r.failedP50.Round(time.Millisecond), r.failedP99.Round(time.Millisecond))
}

// msOrNull is d in milliseconds, or nil (null in JSON) when there is nothing to time.
func msOrNull(d time.Duration, n int) *float64 {
	if n == 0 {
		return nil
	}
	v := toMS(d)
	return &v
}

// summary is one mode's entry in summary.json.
type summary struct {
	UserCalls          int      `json:"user_calls"`
	OK                 int      `json:"ok"`
	Failed             int      `json:"failed"`
	Lost               int      `json:"lost"`
	DBPerCallOutage    float64  `json:"db_requests_per_call_outage"`
	DBPerCallRun       float64  `json:"db_requests_per_call_run"`
	DBOneActionDown    *int     `json:"db_requests_one_action_db_down,omitempty"`
	GoodputDuring      float64  `json:"goodput_during_outage"`
	GoodputAfter       float64  `json:"goodput_after_outage"`
	RecoverySeconds    *float64 `json:"recovery_seconds"`
	RecoveryStrictSecs *float64 `json:"recovery_strict_seconds"`
	P50ms              float64  `json:"p50_ms"`
	P99ms              float64  `json:"p99_ms"`
	FailedP50ms        *float64 `json:"failed_p50_ms"` // null when no call failed
	FailedP99ms        *float64 `json:"failed_p99_ms"`
	SuppressedOwner    int64    `json:"suppressed_owner"`
	RefusedBudget      int64    `json:"refused_budget"`
	RefusedBreaker     int64    `json:"refused_breaker"`
	Shed               int64    `json:"shed"`
	PeakDBPerSecond    int      `json:"peak_db_requests_per_second"`
	PeakQueries        int      `json:"peak_db_queries_per_second"`
	DBCapacity         int      `json:"db_capacity_per_second"`
	UserRate           float64  `json:"user_rate"`
	UserTimeoutSeconds float64  `json:"user_timeout_seconds"`
}

func toMS(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func writeSummary(path string, cfg config, rs []result) error {
	out := map[string]summary{}
	for _, r := range rs {
		s := summary{UserCalls: r.calls, OK: r.ok, Failed: r.failed, Lost: r.lost,
			DBPerCallOutage: r.amplification, DBPerCallRun: r.overall,
			GoodputDuring: r.goodputDuring, GoodputAfter: r.goodputAfter,
			P50ms: toMS(r.p50), P99ms: toMS(r.p99), FailedP50ms: msOrNull(r.failedP50, r.failed), FailedP99ms: msOrNull(r.failedP99, r.failed),
			SuppressedOwner: r.suppressedOwner, RefusedBudget: r.budget, RefusedBreaker: r.breakerRefused, Shed: r.shedded,
			PeakDBPerSecond: r.peakDB, PeakQueries: r.peakQueries, DBCapacity: dbCapacity, UserRate: cfg.rate, UserTimeoutSeconds: userTimeout.Seconds()}
		if r.recovery >= 0 {
			v := r.recovery.Seconds()
			s.RecoverySeconds = &v
		}
		if r.recoveryStrict >= 0 {
			v := r.recoveryStrict.Seconds()
			s.RecoveryStrictSecs = &v
		}
		if r.probe >= 0 {
			p := r.probe
			s.DBOneActionDown = &p
		}
		out[r.name] = s
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// chartFile is one chart of the report.
type chartFile struct {
	Name, Title, Alt string
	Data             template.URL // the PNG inline, so the page has no external assets
}

func writeReport(dir string, cfg config, rs []result, ss []*series, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "storm.csv"), rs, ss, cfg); err != nil {
		return err
	}
	if err := writeSummary(filepath.Join(dir, "summary.json"), cfg, rs); err != nil {
		return err
	}
	perSecond := 1 / cfg.bucket.Seconds()
	var charts []chartFile
	add := func(name, title, alt string, p *plot.Plot) error {
		path := filepath.Join(dir, name)
		if err := p.Save(9*vg.Inch, 4*vg.Inch, path); err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		charts = append(charts, chartFile{Name: name, Title: title, Alt: alt,
			Data: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))})
		return nil
	}
	if rs[0].probe >= 0 {
		p, err := missionChart(rs)
		if err != nil {
			return err
		}
		if err := add("one-action.png", "Database requests for one user action, database down",
			"bar chart: database requests made for one user action while the database is down, per mode: "+probeText(rs), p); err != nil {
			return err
		}
	}
	lines := make([]line, len(ss))
	for k, s := range ss {
		lines[k] = line{rs[k].name, smooth(cfg, func(i int) float64 { return float64(s.db[i]) * perSecond }), modeColors[k%len(modeColors)], nil}
	}
	p := timeChart(cfg, "Database requests per second (log scale, 0 on the bottom line; 500 ms means)", "database requests per second", true, lines, float64(dbCapacity))
	if err := add("db-requests.png", "Database requests", "database requests per second for each mode, log scale, with the database's capacity", p); err != nil {
		return err
	}
	for k, s := range ss {
		lines[k] = line{rs[k].name, smooth(cfg, func(i int) float64 { return float64(s.okDone[i]) * perSecond }), modeColors[k%len(modeColors)], nil}
	}
	p = timeChart(cfg, "Successful user calls per second (500 ms means)", "successful user calls per second", false, lines, 0)
	if err := add("goodput.png", "Goodput", "successful user calls per second for each mode", p); err != nil {
		return err
	}
	// Outcomes by the time they reached the user: the run plus the time the last calls
	// may take, up to the user giving up.
	done := cfg
	done.duration += userTimeout
	for k, s := range ss {
		out := []line{
			{"answered ok", smooth(done, func(i int) float64 { return float64(s.okDone[i]) * perSecond }), outcomeColors[0], nil},
			{"answered with an error", smooth(done, func(i int) float64 { return float64(s.failedDone[i]) * perSecond }), outcomeColors[1], []vg.Length{vg.Points(6), vg.Points(3)}},
			{"lost (user gave up)", smooth(done, func(i int) float64 { return float64(s.lostDone[i]) * perSecond }), outcomeColors[2], []vg.Length{vg.Points(2), vg.Points(2)}},
		}
		p = timeChart(done, "Outcomes of user calls by the time the user had them, "+rs[k].name+" (500 ms means)", "user calls per second", false, out, 0)
		p.X.Label.Text = "time since the run started (s): when the answer came, or the user gave up"
		if err := add("outcomes-"+rs[k].name+".png", "Outcomes, "+rs[k].name+", by completion time",
			"user calls per second answered ok, with an error, or given up on by the user, by the time that happened, for "+rs[k].name, p); err != nil {
			return err
		}
	}
	var html bytes.Buffer
	if err := page.Execute(&html, struct {
		Rate               float64
		Duration, Down, Up time.Duration
		Seed               uint64
		Contend            int
		Capacity           int
		Text               string
		Charts             []chartFile
		UserTimeout        time.Duration
	}{cfg.rate, cfg.duration, cfg.down, cfg.up, cfg.seed, cfg.contend, dbCapacity, text, charts, userTimeout}); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), html.Bytes(), 0o644)
}

func writeCSV(path string, rs []result, ss []*series, cfg config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	_ = w.Write([]string{"mode", "t_seconds", "calls_started", "calls_ok", "calls_failed", "calls_lost", "calls_ok_completed", "db_requests", "calls_failed_completed", "calls_lost_completed"})
	for k, s := range ss {
		for i := range s.db {
			_ = w.Write([]string{rs[k].name, strconv.FormatFloat(float64(i)*cfg.bucket.Seconds(), 'f', 1, 64),
				strconv.Itoa(s.started[i]), strconv.Itoa(s.ok[i]), strconv.Itoa(s.failed[i]), strconv.Itoa(s.lost[i]), strconv.Itoa(s.okDone[i]), strconv.Itoa(s.db[i]),
				strconv.Itoa(s.failedDone[i]), strconv.Itoa(s.lostDone[i])})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

var (
	modeColors    = []color.Color{color.RGBA{R: 200, G: 40, B: 40, A: 255}, color.RGBA{R: 230, G: 140, B: 0, A: 255}, color.RGBA{R: 30, G: 90, B: 200, A: 255}}
	outcomeColors = []color.Color{color.RGBA{R: 30, G: 140, B: 60, A: 255}, color.RGBA{R: 200, G: 40, B: 40, A: 255}, color.RGBA{R: 90, G: 90, B: 90, A: 255}}
)

// line is one series of a chart.
type line struct {
	name   string
	pts    plotter.XYs
	color  color.Color
	dashes []vg.Length
}

// smooth returns, for every bucket of the run, the mean of y over the 5 buckets
// ending there (500 ms), so that the Poisson noise of 100 ms buckets does not hide
// the shape; storm.csv has the raw series.
func smooth(cfg config, y func(i int) float64) plotter.XYs {
	const width = 5
	n := int(cfg.duration/cfg.bucket) + 1
	pts := make(plotter.XYs, n)
	for i := range pts {
		var sum float64
		k := 0
		for j := max(0, i-width+1); j <= i; j++ {
			sum += y(j)
			k++
		}
		pts[i].X = float64(i) * cfg.bucket.Seconds()
		pts[i].Y = sum / float64(k)
	}
	return pts
}

// logFloor is where a log-scale chart draws zero, on its bottom line, labelled 0. The
// charts plot means of 5 buckets of 100 ms in units per second, so a value that is
// not zero is at least 2: nothing else is drawn as low as the floor.
const logFloor = 1

// zeroFloor labels the floor of a log axis "0": values of zero are drawn there.
type zeroFloor struct{ m plot.Ticker }

func (z zeroFloor) Ticks(lo, hi float64) []plot.Tick {
	ticks := z.m.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Value == logFloor {
			ticks[i].Label = "0"
			return ticks
		}
	}
	return append([]plot.Tick{{Value: logFloor, Label: "0"}}, ticks...)
}

// missionChart draws the database requests one user action makes while the
// database is down, per mode.
func missionChart(rs []result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Database requests for one user action, database down"
	p.Y.Label.Text = "database requests"
	vals := make(plotter.Values, len(rs))
	names := make([]string, len(rs))
	top := 0.0
	for k, r := range rs {
		vals[k], names[k] = float64(r.probe), r.name
		top = max(top, vals[k])
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(60))
	if err != nil {
		return nil, err
	}
	bars.Color = modeColors[2]
	bars.LineStyle.Width = 0
	p.Add(plotter.NewGrid(), bars)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(rs))-0.5 // room beside the outer bars
	p.Y.Min, p.Y.Max = 0, math.Max(top, 1)*1.2
	p.Y.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
	xys := make(plotter.XYs, len(rs))
	labels := make([]string, len(rs))
	for k, v := range vals {
		xys[k] = plotter.XY{X: float64(k), Y: v}
		labels[k] = strconv.Itoa(int(v))
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	l.Offset = vg.Point{X: -vg.Points(5), Y: vg.Points(4)}
	p.Add(l)
	return p, nil
}

// probeText is the probes' figures, "naive 64, owner_only 4, backstop 4".
func probeText(rs []result) string {
	parts := make([]string, len(rs))
	for k, r := range rs {
		parts[k] = r.name + " " + strconv.Itoa(r.probe)
	}
	return strings.Join(parts, ", ")
}

// timeChart draws lines over the run's time, with the outage shaded, an optional
// horizontal capacity line, and the legend above every line.
func timeChart(cfg config, title, ylabel string, logY bool, lines []line, capacity float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since the run started (s)"
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, cfg.duration.Seconds()
	p.X.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
	top := capacity
	for _, l := range lines {
		for _, pt := range l.pts {
			top = max(top, pt.Y)
		}
	}
	lo := 0.0
	if logY {
		lo = logFloor
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = zeroFloor{plotticks.Plain(plot.LogTicks{Prec: -1})}
		p.Y.Max = math.Max(top, 10) * 8 // a decade and more of headroom for the legend
		for i := range lines {
			pts := slices.Clone(lines[i].pts)
			for j := range pts {
				pts[j].Y = math.Max(pts[j].Y, logFloor) // zero is drawn on the floor
			}
			lines[i].pts = pts
		}
	} else {
		p.Y.Tick.Marker = plotticks.Plain(plot.DefaultTicks{})
		p.Y.Max = math.Max(top, 1) * 1.45 // room above the lines for the legend
	}
	p.Y.Min = lo
	p.Add(plotter.NewGrid())

	shade, err := plotter.NewPolygon(plotter.XYs{
		{X: cfg.down.Seconds(), Y: lo}, {X: cfg.up.Seconds(), Y: lo},
		{X: cfg.up.Seconds(), Y: p.Y.Max}, {X: cfg.down.Seconds(), Y: p.Y.Max}})
	if err == nil {
		shade.Color = color.RGBA{R: 235, G: 235, B: 235, A: 255}
		shade.LineStyle.Width = 0
		p.Add(shade)
		p.Legend.Add(fmt.Sprintf("database down (%.1f–%.1f s)", cfg.down.Seconds(), cfg.up.Seconds()), shade)
	}
	if capacity > 0 {
		c, err := plotter.NewLine(plotter.XYs{{X: 0, Y: capacity}, {X: cfg.duration.Seconds(), Y: capacity}})
		if err == nil {
			c.Color = color.Black
			c.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
			c.Width = vg.Points(1)
			p.Add(c)
			p.Legend.Add(fmt.Sprintf("database capacity (%.0f/s)", capacity), c)
		}
	}
	for _, l := range lines {
		pl, err := plotter.NewLine(l.pts)
		if err != nil {
			continue
		}
		pl.Color = l.color
		pl.Width = vg.Points(1.6)
		pl.Dashes = l.dashes
		p.Add(pl)
		p.Legend.Add(l.name, pl)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.Padding = vg.Points(1)
	p.Legend.ThumbnailWidth = vg.Points(22)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

var page = template.Must(template.New("storm").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Backstop storm report</title>
<style>body{font:15px system-ui,sans-serif;margin:2em;max-width:72em}pre{font-size:13px;background:#f6f6f6;padding:1em;overflow-x:auto}img{max-width:100%}</style>
</head><body>
<h1>Retry storm: naive, owner rule only, and Backstop</h1>
<p>edge → api → data → database on 127.0.0.1; {{printf "%.0f" .Rate}} user calls/s for {{.Duration}} in each mode;
the database (capacity {{.Capacity}} requests/s) is down from {{.Down}} to {{.Up}}; seed {{.Seed}}{{if .Contend}}; {{.Contend}} busy goroutines beside it (CPU contention){{end}}.</p>
<h2>What to look at</h2>
<p id="what">First the chart and the row <em>database requests for one user action, database down</em>: three layers that each
retry 4 times turn one click into 4 × 4 × 4 = 64 requests against a database that is already down, while with one
retry owner per call path it stays at 4. Then the database chart (log scale; a mode that sends the database nothing
is drawn on the bottom line, labelled 0): the naive stack offers the database
many times its capacity during the outage and stays above it after the database returns, so it never recovers; the
owner rule alone removes most of that. Backstop's breakers, with their default options, probe the dead database
about once a second instead, refuse the rest at once, tell the caller when they probe next, and let go within a
second of the database's return: it answers as many calls as the owner rule alone at a few per cent of its load on
the database. The paragraph under the table says what each stack cost and bought.
Every call is accounted for: answered ok, answered with an error, or lost because the user gave up first.</p>
<p id="read-outcomes">The outcome charts count each call when its user had the outcome: when the answer came, or,
for a lost call, when the user gave up, {{.UserTimeout}} after starting it. So they run {{.UserTimeout}} past the
end of the calls, and a call started just before the outage and answered ok during it is counted during it. The
table counts calls by the time they started.</p>
<pre id="table">{{.Text}}</pre>
{{range .Charts}}<h2>{{.Title}}</h2><img id="{{.Name}}" src="{{.Data}}" alt="{{.Alt}}">
{{end}}<p>The per-100 ms series are in storm.csv and the figures in summary.json, beside this page.</p>
</body></html>
`))
