package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/retry"
)

// noBackoff retries at once: Brooker's "No backoff".
type noBackoff struct{}

func (noBackoff) Delay(int, time.Duration, time.Duration, time.Duration, jitter.Rand) time.Duration {
	return 0
}

// TestHerd_BrookersRanking plays Brooker's herd with the real retry stage: clients
// from 10 to 100 contending for one row, base 5 ms, cap 2 s, several seeds a point;
// and checks his findings: every jittered strategy does less work than no backoff and
// than exponential backoff without jitter; Full jitter does the least; Decorrelated
// finishes sooner than Full; Equal is the slowest of the jittered ones.
func TestHerd_BrookersRanking(t *testing.T) {
	strategies := []struct {
		name string
		s    retry.Strategy
	}{{"No backoff", noBackoff{}}, {"Exponential", retry.None{}}, {"Equal", retry.Equal{}}, {"Full", retry.Full{}}, {"Decorrelated", retry.Decorrelated{}}}
	const sNone, sExpo, sEqual, sFull, sDecorr = 0, 1, 2, 3, 4
	counts, runs := []int{10, 40, 70, 100}, 4
	work := make([]float64, len(strategies))
	took := make([]time.Duration, len(strategies))
	var b strings.Builder
	fmt.Fprintf(&b, "%8s", "clients")
	for _, st := range strategies {
		fmt.Fprintf(&b, "%22s", st.name)
	}
	fmt.Fprintf(&b, "\n%8s", "")
	for range strategies {
		fmt.Fprintf(&b, "%22s", "writes / ms")
	}
	for _, n := range counts {
		fmt.Fprintf(&b, "\n%8d", n)
		for k, st := range strategies {
			var writes int
			var done time.Duration
			for r := range runs {
				synctest.Test(t, func(*testing.T) {
					h := herd(n, retry.Options{Base: 5 * time.Millisecond, Cap: 2 * time.Second, Strategy: st.s}, uint64(n)<<8|uint64(r))
					writes += h.Writes
					done += h.Done
				})
			}
			w, d := float64(writes)/float64(runs), done/time.Duration(runs)
			work[k] += w
			took[k] += d / time.Duration(len(counts))
			fmt.Fprintf(&b, "%22s", fmt.Sprintf("%.0f / %.0f", w, float64(d)/float64(time.Millisecond)))
		}
	}
	rank := func(key func(k int) float64) string {
		ks := []int{0, 1, 2, 3, 4}
		slices.SortStableFunc(ks, func(a, b int) int {
			switch {
			case key(a) < key(b):
				return -1
			case key(a) > key(b):
				return 1
			}
			return 0
		})
		var names []string
		for _, k := range ks {
			names = append(names, strategies[k].name)
		}
		return strings.Join(names, " < ")
	}
	byWork, byTime := rank(func(k int) float64 { return work[k] }), rank(func(k int) float64 { return float64(took[k]) })
	fmt.Fprintf(&b, "\nwork (sum of mean writes): %s\ncompletion (mean): %s", byWork, byTime)
	t.Logf("Brooker's herd, the real retry stage in virtual time, %d runs a point:\n%s", runs, b.String())
	// The orders go run ./examples/herd -min 10 -max 100 -step 30 -runs 4 prints, on
	// Brooker's model with the strategies alone.
	if want := "Full < Equal < Decorrelated < Exponential < No backoff"; byWork != want {
		t.Errorf("ranking by work: %s, want %s", byWork, want)
	}
	if want := "No backoff < Decorrelated < Full < Equal < Exponential"; byTime != want {
		t.Errorf("ranking by completion time: %s, want %s", byTime, want)
	}
	for _, k := range []int{sEqual, sFull, sDecorr} {
		if work[k] >= work[sNone] || work[k] >= work[sExpo] {
			t.Errorf("%s: %.0f writes, not fewer than no backoff (%.0f) and exponential (%.0f)", strategies[k].name, work[k], work[sNone], work[sExpo])
		}
	}
	for _, k := range []int{sNone, sExpo, sEqual, sDecorr} {
		if work[sFull] >= work[k] {
			t.Errorf("Full jitter: %.0f writes, not fewer than %s's %.0f", work[sFull], strategies[k].name, work[k])
		}
	}
	if took[sDecorr] >= took[sFull] {
		t.Errorf("Decorrelated finished in %v, not sooner than Full's %v", took[sDecorr], took[sFull])
	}
	if took[sEqual] <= took[sFull] || took[sEqual] <= took[sDecorr] {
		t.Errorf("Equal finished in %v, not the slowest of the jittered (Full %v, Decorrelated %v)", took[sEqual], took[sFull], took[sDecorr])
	}
}
