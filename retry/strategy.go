package retry

import (
	"math"
	"time"

	"github.com/backstop-go/backstop/jitter"
)

// A Strategy computes the backoff before a retry. Strategies are stateless values.
// Whatever a schedule needs from earlier retries is passed in: Decorrelated's
// previous delay. Per-call state lives in the retry loop.
//
// Implementers: Delay must be safe for concurrent use, and must not allocate. It
// must return a duration in [0, cap] for any n ≥ 1, without overflowing for any
// cap. The retry loop clamps whatever a Strategy returns into [0, cap] all the
// same.
type Strategy interface {
	// Delay returns the backoff before retry n (n = 1 before the second attempt).
	// The argument prev is the delay before the previous retry (0 before the
	// first). The arguments base and cap are Options.Base and Options.Cap.
	Delay(n int, prev, base, cap time.Duration, r jitter.Rand) time.Duration
}

// window returns min(cap, base·2^(n−1)) without overflowing.
func window(n int, base, cap time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 63 {
		return cap
	}
	w := float64(base) * math.Ldexp(1, n-1)
	if w >= float64(cap) {
		return cap
	}
	return time.Duration(w)
}

// between returns a uniform duration in [lo, hi).
func between(lo, hi time.Duration, r jitter.Rand) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Float64()*float64(hi-lo))
}

// Full is "full jitter": random(0, min(cap, base·2^(n−1))). It spreads clients over
// the whole window. It does the least total work under contention (Brooker,
// "Exponential Backoff and Jitter"). It is the default. With the default base
// 100 ms and cap 5 s:
//
//	retry n   1       2       3       4       5       6       7+
//	window    100ms   200ms   400ms   800ms   1.6s    3.2s    5s
//	delay     uniform in [0, window); mean window/2
type Full struct{}

// Delay implements [Strategy].
func (Full) Delay(n int, _, base, cap time.Duration, r jitter.Rand) time.Duration {
	return between(0, window(n, base, cap), r)
}

// Equal is "equal jitter": t/2 + random(0, t/2) with t = min(cap, base·2^(n−1)).
// It keeps at least half the exponential wait. With base 100 ms, cap 5 s:
//
//	retry n   1           2           3           4            5+ …
//	delay     [50,100)ms  [100,200)ms [200,400)ms [400,800)ms  … up to [2.5,5)s
type Equal struct{}

// Delay implements [Strategy].
func (Equal) Delay(n int, _, base, cap time.Duration, r jitter.Rand) time.Duration {
	t := window(n, base, cap)
	return t/2 + between(0, t-t/2, r)
}

// Decorrelated is "decorrelated jitter": min(cap, random(base, prev·3)). Before
// the first retry, prev = base. Each delay grows from the last one drawn rather
// than from n. With base 100 ms, cap 5 s:
//
//	retry n   1              2                    …
//	delay     [100, 300)ms   [100ms, 3·delay₁)    … never above 5s
type Decorrelated struct{}

// Delay implements [Strategy].
func (Decorrelated) Delay(_ int, prev, base, cap time.Duration, r jitter.Rand) time.Duration {
	if prev < base {
		prev = base
	}
	hi := cap
	if prev < cap/3 {
		hi = prev * 3
	}
	return min(cap, between(base, hi, r))
}

// None is exponential backoff without jitter: exactly min(cap, base·2^(n−1)).
// Clients that fail together retry together. It is here for comparison, not for
// production. The storm example's naive side uses it. With base 100 ms, cap 5 s:
//
//	retry n   1       2       3       4       5       6       7+
//	delay     100ms   200ms   400ms   800ms   1.6s    3.2s    5s
type None struct{}

// Delay implements [Strategy].
func (None) Delay(n int, _, base, cap time.Duration, _ jitter.Rand) time.Duration {
	return window(n, base, cap)
}

// DefaultGRPCMultiplier is the multiplier [GRPC] uses when Multiplier is 0. It is
// gRPC's connection-backoff default.
const DefaultGRPCMultiplier = 1.6

// GRPC is the backoff of gRPC retries (gRFC A6, as amended in 2024). It waits
// min(initial·Multiplier^(n−1), max) · random(0.8, 1.2), as grpc-go does. Here
// initial = Options.Base and max = Options.Cap. A delay may pass Cap by up to
// 20 %. A Cap below Base holds every delay at Cap: initial is A6's, max its
// ceiling. With base 100 ms, cap 5 s and Multiplier 1.6:
//
//	retry n   1             2             3             4              9+
//	centre    100ms         160ms         256ms         410ms          5s
//	delay     [80, 120)ms   [128, 192)ms  [205, 307)ms  [328, 492)ms   [4, 6)s
//
// See https://github.com/grpc/proposal/blob/master/A6-client-retries.md.
type GRPC struct {
	// Multiplier is the growth factor per retry; 0 means DefaultGRPCMultiplier.
	// A6 allows any value > 0: below 1, the delays shrink from Base. New refuses a
	// negative, infinite or NaN one.
	Multiplier float64
}

// Delay implements [Strategy].
func (g GRPC) Delay(n int, _, base, cap time.Duration, r jitter.Rand) time.Duration {
	m := g.Multiplier
	if m == 0 {
		m = DefaultGRPCMultiplier
	}
	if n < 1 {
		n = 1
	}
	c := float64(base) * math.Pow(m, float64(n-1))
	if c > float64(cap) || math.IsInf(c, 0) || math.IsNaN(c) {
		c = float64(cap)
	}
	return durationOf(c * (0.8 + 0.4*r.Float64()))
}

// durationOf converts ns to a Duration, clamped to [0, the longest Duration].
func durationOf(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(max(ns, 0))
}

// grpcJitterAbove is how far past Cap a [GRPC] delay may go: A6's 1.2.
const grpcJitterAbove = 1.2

// ceiling returns the longest delay strategy s may wait with Cap cap. That is Cap,
// or 1.2·Cap for [GRPC]: A6's jitter above max.
func ceiling(s Strategy, cap time.Duration) time.Duration {
	if _, ok := s.(GRPC); ok {
		return durationOf(float64(cap) * grpcJitterAbove)
	}
	return cap
}
