package retry

import (
	"fmt"
	"strings"
	"time"

	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/policy"
)

// MaxScheduled is the most sleeps [Schedule] lists.
const MaxScheduled = 64

// fixedRand is a jitter.Rand that always draws r, for working out a schedule.
type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

// Schedule returns the sleeps a retry with these settings makes before attempts 2
// … attempts. For each, it gives the shortest, the mean and the longest the
// strategy draws, without server hints. The figures come from the strategy itself.
// The extremes are its draws at the ends of the random range. The mean is over 101
// evenly spaced draws: the midpoints of 101 equal slices. So the figures hold for
// any Strategy, Decorrelated's chained sleeps included.
//
// It lists at most MaxScheduled sleeps. A retry with more attempts repeats the last
// range listed. Every built-in strategy has reached its cap by then.
func Schedule(s Strategy, attempts int, base, cap time.Duration) []policy.Sleep {
	if s == nil {
		s = Full{}
	}
	var out []policy.Sleep
	var pMin, pMean, pMax time.Duration
	for n := 1; n < attempts && n <= MaxScheduled; n++ {
		clamp := func(d time.Duration) time.Duration { return min(max(d, 0), ceiling(s, cap)) }
		lo := clamp(s.Delay(n, pMin, base, cap, fixedRand(0)))
		hi := clamp(s.Delay(n, pMax, base, cap, fixedRand(1-1e-12)))
		var sum float64
		const draws = 101
		for i := range draws {
			sum += float64(clamp(s.Delay(n, pMean, base, cap, fixedRand((float64(i)+0.5)/draws))))
		}
		mean := time.Duration(sum / draws)
		// Microseconds: the top of a range drawn from [0, 1) is a hair below its bound.
		out = append(out, policy.Sleep{Min: lo.Round(time.Microsecond), Mean: mean.Round(time.Microsecond), Max: hi.Round(time.Microsecond)})
		pMin, pMean, pMax = lo, mean, hi
	}
	return out
}

// ExplainStage implements policy.StageExplainer.
func (r *Retry) ExplainStage() policy.Stage {
	if r.max == 1 {
		return policy.Stage{Summary: "1 attempt: never retries (MaxAttempts 1)", Attempts: 1}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "up to %d attempts; ", r.max)
	if r.should == nil {
		b.WriteString("retries transient errors only (marked retryable, timeouts, refused or reset connections); ")
	} else {
		b.WriteString("retries what Options.ShouldRetry allows; ")
	}
	name := strings.TrimPrefix(fmt.Sprintf("%T", r.strategy), "retry.")
	fmt.Fprintf(&b, "%s backoff from %v to at most %v; waits a server's hint up to %v (a longer one ends the call)",
		name, r.base, r.cap, r.maxHint)
	switch {
	case r.minAttempt > 0:
		fmt.Fprintf(&b, "; starts no attempt with less than %v left before the deadline", r.minAttempt)
	case r.minAttempt == 0:
		b.WriteString("; starts no attempt with less than its per-attempt timeout, if any, left before the deadline")
	}
	st := policy.Stage{Summary: b.String(), Attempts: r.max, Sleeps: Schedule(r.strategy, r.max, r.base, r.cap)}
	st.MoreSleeps = max(r.max-1-len(st.Sleeps), 0)
	st.MaxHint = check.AddSat(r.maxHint, r.maxHint/2) // a hint plus its upward jitter
	return st
}
