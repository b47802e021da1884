package main

import (
	"math"
	"slices"
	"time"

	"github.com/backstop-go/backstop/breaker"
)

// call is one call's record. Times are since the run began.
type call struct {
	start, end time.Duration
	ok         bool // a 200 whose body was read to the end
	refused    bool // the breaker refused it: its error matches breaker.ErrOpen
	attempts   int  // requests it sent towards the proxy
}

// change is one breaker state change, as OnStateChange reported it.
type change struct {
	at       time.Duration
	from, to breaker.State
}

// period is one time the breaker spent open, relative to the fault's start. End
// is -1 if the breaker was still open when the run ended.
type period struct {
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`
}

// figures are what one fault's run measured. A recovery of -1 means none was
// seen before the run ended.
type figures struct {
	Fault    string  `json:"fault"`
	Duration float64 `json:"duration_s"`
	// Healthy is the share answered of the calls that ended before the fault.
	Healthy float64 `json:"healthy_share"`
	// FirstOK is the time from the fault's end to the start of the first answered
	// call that started after it.
	FirstOK float64 `json:"recovery_first_ok_s"`
	// Stable is the time from the fault's end to the start of the first answered
	// call from which every 1-second window of calls is at least stableShare
	// answered.
	Stable float64 `json:"recovery_stable_s"`
	// After is the share answered among the calls that started in the second
	// after FirstOK.
	After float64 `json:"share_second_after_recovery"`
	// Calls started during the fault; Passed of them passed the breaker, Tripping
	// before it first opened, Probes after.
	Calls    int `json:"calls_in_fault"`
	Passed   int `json:"passed_breaker_in_fault"`
	Tripping int `json:"passed_before_first_open"`
	Probes   int `json:"probes"`
	// ProbeRate is Probes per second, to three decimals, from the breaker's first open to the fault's
	// end (over the whole fault if it never opened).
	ProbeRate float64 `json:"probes_per_s"`
	// HalfOpens counts the breaker's moves to half-open during the fault.
	HalfOpens int `json:"half_opens_in_fault"`
	// Attempts is the requests that calls started in the fault sent to the proxy;
	// Upstream is the requests the upstream server received during the fault.
	Attempts int      `json:"attempts_in_fault"`
	Upstream int      `json:"upstream_requests_in_fault"`
	Open     []period `json:"open_periods"`
	// Failed names the claims this fault broke.
	Failed []string `json:"failed_claims"`
}

// stableShare is the least share of calls answered in every 1-second window for
// the stable recovery.
const stableShare = 0.9

// firstOK returns the time from `from` to the start of the first answered call that
// started at or after it, or -1 if there is none. calls must be sorted by start.
func firstOK(calls []call, from time.Duration) time.Duration {
	for _, c := range calls {
		if c.start >= from && c.ok {
			return c.start - from
		}
	}
	return -1
}

// share returns the share of calls started in [from, to) that were answered, and
// how many started there.
func share(calls []call, from, to time.Duration) (float64, int) {
	n, ok := 0, 0
	for _, c := range calls {
		if c.start >= from && c.start < to {
			n++
			if c.ok {
				ok++
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(ok) / float64(n), n
}

// stable returns the time from `from` to the start of the first answered call s,
// at or after from, such that at least min of the calls started in every window
// [w, w+window) are answered, for every call start w ≥ s with w+window no later
// than the last call's start. It is -1 if there is no such call. calls must be
// sorted by start.
func stable(calls []call, from, window time.Duration, min float64) time.Duration {
	if len(calls) == 0 {
		return -1
	}
	last := calls[len(calls)-1].start
	first := len(calls) // the first call at or after from
	for i, c := range calls {
		if c.start >= from {
			first = i
			break
		}
	}
	// j ends window i (exclusive); ok counts the answered calls in [i, j).
	j, ok := first, 0
	bad := first - 1 // the last window start that fell short
	for i := first; i < len(calls) && calls[i].start+window <= last; i++ {
		for j < len(calls) && calls[j].start < calls[i].start+window {
			if calls[j].ok {
				ok++
			}
			j++
		}
		if float64(ok) < min*float64(j-i) {
			bad = i
		}
		if calls[i].ok {
			ok--
		}
	}
	for _, c := range calls[bad+1:] {
		if c.start+window > last {
			break
		}
		if c.ok {
			return c.start - from
		}
	}
	return -1
}

// openPeriods turns state changes into the periods the breaker spent open,
// relative to zero.
func openPeriods(changes []change, zero time.Duration) []period {
	var ps []period
	for _, c := range changes {
		switch {
		case c.to == breaker.StateOpen:
			ps = append(ps, period{Start: seconds(c.at - zero), End: -1})
		case c.from == breaker.StateOpen && len(ps) > 0 && ps[len(ps)-1].End < 0:
			ps[len(ps)-1].End = seconds(c.at - zero)
		}
	}
	return ps
}

// measure works out one fault's figures from its records. The fault lasted from
// start to end; upstream holds the arrival times of the upstream's requests.
func measure(name string, calls []call, changes []change, upstream []time.Duration, start, end time.Duration) figures {
	slices.SortFunc(calls, func(a, b call) int { return int(a.start - b.start) })
	f := figures{Fault: name, Duration: seconds(end - start), FirstOK: -1, Stable: -1}
	healthy := slices.DeleteFunc(slices.Clone(calls), func(c call) bool { return c.end >= start })
	f.Healthy, _ = share(healthy, 0, start)
	if d := firstOK(calls, end); d >= 0 {
		f.FirstOK = seconds(d)
		f.After, _ = share(calls, end+d, end+d+time.Second)
	}
	if d := stable(calls, end, time.Second, stableShare); d >= 0 {
		f.Stable = seconds(d)
	}
	opened := time.Duration(-1) // the breaker's first open during the fault
	for _, c := range changes {
		if c.at >= start && c.at < end {
			if c.to == breaker.StateOpen && opened < 0 {
				opened = c.at
			}
			if c.to == breaker.StateHalfOpen {
				f.HalfOpens++
			}
		}
	}
	for _, c := range calls {
		if c.start < start || c.start >= end {
			continue
		}
		f.Calls++
		f.Attempts += c.attempts
		if c.refused {
			continue
		}
		f.Passed++
		if opened < 0 || c.start < opened {
			f.Tripping++
		} else {
			f.Probes++
		}
	}
	from := opened
	if from < 0 {
		from, f.Probes, f.Tripping = start, f.Passed, 0
	}
	if end > from {
		f.ProbeRate = math.Round(1000*float64(f.Probes)/(end-from).Seconds()) / 1000
	}
	for _, t := range upstream {
		if t >= start && t < end {
			f.Upstream++
		}
	}
	f.Open = openPeriods(changes, start)
	return f
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
