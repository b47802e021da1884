package sim_test

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-go/backstop/sim"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestScale_ThousandServices runs the 1 000-service layered graph at 40 % of its databases' capacity.
// SIM_CALLS sets the number of user calls (default 20 000; the run is
// 1 000 000).
func TestScale_ThousandServices(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a throughput figure: a long run, and meaningless under the race detector")
	}
	defer sim.Tune()()
	calls := 20000
	if v := os.Getenv("SIM_CALLS"); v != "" {
		calls, _ = strconv.Atoi(v)
	}
	for _, stack := range []sim.Stack{sim.Backstop} {
		sc := sim.Layered(stack, 1000, 1, sim.Load{})
		rate := 0.4 * sc.Capacity()
		sc.Load = sim.Load{Rate: rate, Duration: time.Duration(float64(calls) / rate * float64(time.Second))}
		sc.Bucket = time.Second
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		wall, cpu := time.Now(), cpuTime()
		s, err := sim.Run(t, sc)
		if err != nil {
			t.Fatal(err)
		}
		el, used := time.Since(wall), cpuTime()-cpu
		runtime.ReadMemStats(&m1)
		t.Logf("%s: %d services, %d calls (%.0f/s of %.0f/s capacity, %.0f s virtual), ok %.4f; %d events; wall %v, cpu %v: %.0f calls per wall second, %.1f µs cpu and %.0f allocations per call, %d collections",
			stack, len(sc.Services), s.Calls, rate, sc.Capacity(), s.Virtual, s.OKShare, s.Events, el.Round(time.Millisecond), used.Round(time.Millisecond),
			float64(s.Calls)/el.Seconds(), float64(used.Microseconds())/float64(s.Calls), float64(m1.Mallocs-m0.Mallocs)/float64(s.Calls), m1.NumGC-m0.NumGC)
		if s.OKShare < 0.99 {
			t.Errorf("ok share %v at 40 %% load with no fault; want ≥ 0.99", s.OKShare)
		}
	}
}
