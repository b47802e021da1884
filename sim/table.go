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
// end).
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-11s %14s %14s %18s %16s\n", "stack", "ok share", "p99 ms", "req/call in fault", "recovery s")
	fmt.Fprintf(w, "%-11s %14s %14s %18s %16s\n", "", "median/worst", "median/worst", "median/worst", "median/worst")
	for _, r := range rows {
		sp := r.Spread
		pc, rec := "—", "—"
		if sp.PerCall != nil {
			pc = fmt.Sprintf("%.2f/%.2f", sp.PerCall.Median, sp.PerCall.Worst)
			rec = fmt.Sprintf("%s/%s", secs(sp.Recovery.Median), secs(sp.Recovery.Worst))
		}
		fmt.Fprintf(w, "%-11s %14s %14s %18s %16s\n", r.Stack, fmt.Sprintf("%.3f/%.3f", sp.OKShare.Median, sp.OKShare.Worst),
			fmt.Sprintf("%.0f/%.0f", sp.P99.Median, sp.P99.Worst), pc, rec)
	}
}

func secs(v float64) string {
	if v < 0 {
		return "never"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
