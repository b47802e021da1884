package main

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

const ms = time.Millisecond

// series returns a call every tick over [0, 10 s); ok says which are answered.
func series(ok func(at time.Duration) bool) []call {
	var cs []call
	for at := time.Duration(0); at < 10*time.Second; at += tick {
		cs = append(cs, call{start: at, end: at + ms, ok: ok(at)})
	}
	return cs
}

// failing returns an ok func that fails calls started in any of the spans.
func failing(spans ...[2]time.Duration) func(time.Duration) bool {
	return func(at time.Duration) bool {
		for _, s := range spans {
			if at >= s[0] && at < s[1] {
				return false
			}
		}
		return true
	}
}

func TestRecovery(t *testing.T) {
	const end = 7000 * ms // the fault's end
	tests := []struct {
		name          string
		ok            func(time.Duration) bool
		first, stable time.Duration
	}{
		{"clean: all answered from 7.44 s", failing([2]time.Duration{2000 * ms, 7440 * ms}), 440 * ms, 440 * ms},
		{"answered at once", failing([2]time.Duration{2000 * ms, end}), 0, 0},
		{
			// 1 in 20 calls fails after the fault, 7.00 s first: 5 % < 10 %, no
			// window falls short.
			"sparse failures after",
			func(at time.Duration) bool { return at >= end && (at/tick)%20 != 10 },
			20 * ms, 20 * ms,
		},
		{
			// A lone answer at 7.1 s, then failures until 7.5 s: the window from
			// 7.40 s holds 5 failures of 50 (10 %), the one from 7.42 s 4 (8 %); the
			// first answered call after 7.40 s starts at 7.50 s.
			"lone early answer",
			func(at time.Duration) bool { return at >= 7500*ms || at == 7100*ms || at < 2000*ms },
			100 * ms, 500 * ms,
		},
		{
			// 6 failures in a row at 8.5 s put 12 % in every window that holds them.
			"relapse after recovery",
			failing([2]time.Duration{2000 * ms, 7200 * ms}, [2]time.Duration{8500 * ms, 8620 * ms}),
			200 * ms, 1620 * ms,
		},
		{
			// 5 in a row are 10 % of a window: not short of 90 %.
			"a short relapse is within 90 %",
			failing([2]time.Duration{2000 * ms, 7200 * ms}, [2]time.Duration{8500 * ms, 8600 * ms}),
			200 * ms, 200 * ms,
		},
		{"never back", failing([2]time.Duration{2000 * ms, 10 * time.Second}), -1, -1},
		{
			// Back only in the last second of arrivals: no whole window to judge.
			"back too late to judge",
			failing([2]time.Duration{2000 * ms, 9500 * ms}), 2500 * ms, -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := series(tt.ok)
			if got := firstOK(cs, end); got != tt.first {
				t.Errorf("firstOK = %v, want %v", got, tt.first)
			}
			if got := stable(cs, end, time.Second, stableShare); got != tt.stable {
				t.Errorf("stable = %v, want %v", got, tt.stable)
			}
		})
	}
}

func TestMeasure_ProbesAndOpenPeriods(t *testing.T) {
	const start, end = 2000 * ms, 7000 * ms
	// The breaker opens at 2.2 s, probes at 3.2, 4.2, 5.2 and 6.2 s (each probe
	// fails), probes again at 7.3 s and closes.
	var changes []change
	changes = append(changes, change{2200 * ms, breaker.StateClosed, breaker.StateOpen})
	for at := 3200 * ms; at <= 6200*ms; at += time.Second {
		changes = append(changes,
			change{at, breaker.StateOpen, breaker.StateHalfOpen},
			change{at + 10*ms, breaker.StateHalfOpen, breaker.StateOpen})
	}
	changes = append(changes,
		change{7300 * ms, breaker.StateOpen, breaker.StateHalfOpen},
		change{7310 * ms, breaker.StateHalfOpen, breaker.StateClosed})
	probe := func(at time.Duration) bool {
		return at == 3200*ms || at == 4200*ms || at == 5200*ms || at == 6200*ms || at == 7300*ms
	}
	calls := series(func(at time.Duration) bool { return at < start || at >= 7300*ms })
	for i := range calls {
		at := calls[i].start
		switch {
		case at >= start && at < 2200*ms: // passed the closed breaker: 10 calls
			calls[i].attempts = 3
		case at >= 2200*ms && at < 7300*ms && !probe(at):
			calls[i].refused = true
		default:
			calls[i].attempts = 1
		}
	}
	upstream := []time.Duration{1990 * ms, 2000 * ms, 6999 * ms, 7000 * ms}
	slices.Reverse(calls) // measure sorts them

	f := measure("down", calls, changes, upstream, start, end)
	want := figures{
		Fault: "down", Duration: 5, Healthy: 1,
		FirstOK: 0.3, Stable: 0.3, After: 1,
		Calls: 250, Passed: 14, Tripping: 10, Probes: 4,
		ProbeRate: 0.833, // 4 probes from the first open at 2.2 s to 7 s
		HalfOpens: 4,
		Attempts:  10*3 + 4, // the tripping calls' retries, and the probes
		Upstream:  2,        // at 2.000 and 6.999 s
		Open: []period{
			{0.2, 1.2}, {1.21, 2.2}, {2.21, 3.2}, {3.21, 4.2}, {4.21, 5.3},
		},
	}
	if f.ProbeRate != want.ProbeRate || !slices.Equal(f.Open, want.Open) {
		t.Errorf("measure: probe rate %v, open %v; want %v, %v", f.ProbeRate, f.Open, want.ProbeRate, want.Open)
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("measure =\n%+v\nwant\n%+v", f, want)
	}
}

func TestMeasure_BreakerNeverOpens(t *testing.T) {
	const start, end = 2000 * ms, 4000 * ms
	calls := series(failing([2]time.Duration{start, end}))
	for i := range calls {
		calls[i].attempts = 1
	}
	f := measure("hang", calls, nil, nil, start, end)
	// Every call in the fault passed a breaker that never opened: 100 over 2 s.
	if f.Probes != 100 || f.Tripping != 0 || f.ProbeRate != 50 || len(f.Open) != 0 {
		t.Errorf("measure: %d probes, %d tripping, %v/s, open %v; want 100, 0, 50/s, none",
			f.Probes, f.Tripping, f.ProbeRate, f.Open)
	}
}

// TestPipeline_TheOneANewUserWrites: the pipeline the package doc shows is valid, and
// makes 3 attempts within its 2 s deadline.
func TestPipeline_TheOneANewUserWrites(t *testing.T) {
	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(breaker.New(breaker.Options{Name: "up"})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 3})))
	if err != nil {
		t.Fatal(err)
	}
	if e := p.Explain(); e.MaxAttempts != 3 || e.WorstCase != 2*time.Second {
		t.Errorf("Explain() = %d attempts, worst case %v; want 3 within 2s", e.MaxAttempts, e.WorstCase)
	}
}
