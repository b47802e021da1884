package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/backstop-go/backstop/sim"
)

// chartColors tells the stacks apart, in the order they ran.
var chartColors = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
}

// writeCharts draws, for the runs of one seed (one per stack): the requests per
// second each service with workers or faults received, one chart per service, and the
// share of calls answered; it returns the files' names.
func writeCharts(dir string, runs []sim.Summary) ([]string, error) {
	var services []string
	for _, r := range runs {
		for _, b := range r.Series {
			for name := range b.Requests {
				if !slices.Contains(services, name) {
					services = append(services, name)
				}
			}
		}
	}
	slices.Sort(services)
	var files []string
	save := func(name string, p *plot.Plot) error {
		files = append(files, name)
		return p.Save(9*vg.Inch, 4*vg.Inch, filepath.Join(dir, name))
	}
	bucketSeconds := func(r sim.Summary) float64 {
		if len(r.Series) > 1 {
			return r.Series[1].At - r.Series[0].At
		}
		return 1
	}
	for _, svc := range services {
		p := newChart(fmt.Sprintf("requests per second at %s (seed %d)", svc, runs[0].Seed), "requests/s")
		for i, r := range runs {
			w := bucketSeconds(r)
			pts := make(plotter.XYs, len(r.Series))
			for j, b := range r.Series {
				pts[j] = plotter.XY{X: b.At, Y: float64(b.Requests[svc]) / w}
			}
			if err := addLine(p, string(r.Stack), pts, i); err != nil {
				return nil, err
			}
		}
		shade(p, runs[0], svc)
		if err := save("requests-"+svc+".png", p); err != nil {
			return nil, err
		}
	}
	p := newChart(fmt.Sprintf("share of the calls started that were answered (seed %d)", runs[0].Seed), "answered")
	p.Y.Min, p.Y.Max = 0, 1.05
	for i, r := range runs {
		var pts plotter.XYs
		for _, b := range r.Series {
			if b.Started > 0 {
				pts = append(pts, plotter.XY{X: b.At, Y: float64(b.OK) / float64(b.Started)})
			}
		}
		if err := addLine(p, string(r.Stack), pts, i); err != nil {
			return nil, err
		}
	}
	if runs[0].Outage != nil {
		shade(p, runs[0], runs[0].Outage.Service)
	}
	if err := save("answered.png", p); err != nil {
		return nil, err
	}
	return files, nil
}

func newChart(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "virtual time (s)"
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, pts plotter.XYs, i int) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = chartColors[i%len(chartColors)]
	l.Width = vg.Points(1.5)
	if i >= len(chartColors) {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// shade marks the service's first fault on the chart with two dashed lines.
func shade(p *plot.Plot, r sim.Summary, svc string) {
	o := r.Outage
	if o == nil || o.Service != svc {
		return
	}
	for _, x := range []float64{o.From, o.To} {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: max(p.Y.Max, 1)}})
		if err != nil {
			continue
		}
		l.Color = color.Gray{Y: 0x80}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		l.LineStyle.Width = vg.Points(0.8)
		p.Add(l)
	}
}
