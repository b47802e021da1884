// Package plotticks holds the tick labels the examples' gonum/plot charts share.
package plotticks

import (
	"strconv"

	"gonum.org/v1/plot"
)

// Plain returns m with its labels rewritten as plain numbers without trailing zeros
// ("2500", not "2500.00"; "0.5", not "5e-01").
func Plain(m plot.Ticker) plot.Ticker { return plain{m} }

type plain struct{ m plot.Ticker }

func (p plain) Ticks(lo, hi float64) []plot.Tick {
	ticks := p.m.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
