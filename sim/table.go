package sim

import (
	"fmt"
	"io"
	"strconv"
)

// Row is one line of [WriteTable]: a stack's runs over seeds.
type Row struct {
	Stack  Stack
	Spread Spread
}

// WriteTable writes the median and worst of each row's figures as a table: the share
// of calls answered, the p99 latency, the faulty service's requests per call during
// its fault and the recovery after it ("never": still below RecoveryShare at the
// end), by buckets and to the call (Outage.RecoveryStrict, in ms).
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-11s %14s %14s %18s %14s %16s\n", "stack", "ok share", "p99 ms", "req/call in fault", "recovery s", "to the call ms")
	fmt.Fprintf(w, "%-11s %14s %14s %18s %14s %16s\n", "", "median/worst", "median/worst", "median/worst", "median/worst", "median/worst")
	for _, r := range rows {
		sp := r.Spread
		pc, rec, strict := "—", "—", "—"
		if sp.PerCall != nil {
			pc = fmt.Sprintf("%.2f/%.2f", sp.PerCall.Median, sp.PerCall.Worst)
			rec = fmt.Sprintf("%s/%s", secs(sp.Recovery.Median, 1, 2), secs(sp.Recovery.Worst, 1, 2))
			strict = fmt.Sprintf("%s/%s", secs(sp.RecoveryStrict.Median, 1000, 0), secs(sp.RecoveryStrict.Worst, 1000, 0))
		}
		fmt.Fprintf(w, "%-11s %14s %14s %18s %14s %16s\n", r.Stack, fmt.Sprintf("%.3f/%.3f", sp.OKShare.Median, sp.OKShare.Worst),
			fmt.Sprintf("%.0f/%.0f", sp.P99.Median, sp.P99.Worst), pc, rec, strict)
	}
}

// secs prints v seconds times scale with prec decimals, or "never" for a negative v.
func secs(v, scale float64, prec int) string {
	if v < 0 {
		return "never"
	}
	return strconv.FormatFloat(v*scale, 'f', prec, 64)
}
