package retry_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backstop-go/backstop/retry"
)

// pinned is a Rand that always returns its value.
type pinned float64

func (p pinned) Float64() float64 { return float64(p) }

const (
	ms   = time.Millisecond
	low  = pinned(0)
	high = pinned(1) // the open end of [0, 1), pinned to show the bound
)

func TestStrategies_AtBothEndsOfTheRandomRange(t *testing.T) {
	base, cap := 100*ms, 5*time.Second
	tests := []struct {
		name string
		s    retry.Strategy
		n    int
		prev time.Duration
		r    pinned
		want time.Duration
	}{
		{"Full", retry.Full{}, 1, 0, low, 0},
		{"Full", retry.Full{}, 1, 0, high, 100 * ms},                          // window base·2⁰
		{"Full", retry.Full{}, 4, 0, high, 800 * ms},                          // base·2³
		{"Full", retry.Full{}, 7, 0, high, 5000 * ms},                         // 6.4s capped at 5s
		{"Full", retry.Full{}, 1000, 0, high, cap},                            // no overflow
		{"Equal", retry.Equal{}, 1, 0, low, 50 * ms},                          // t/2
		{"Equal", retry.Equal{}, 1, 0, high, 100 * ms},                        // t
		{"Equal", retry.Equal{}, 3, 0, low, 200 * ms},                         // t = 400ms
		{"Equal", retry.Equal{}, 9, 0, high, cap},                             //
		{"Decorrelated", retry.Decorrelated{}, 1, 0, low, 100 * ms},           // random(base, 3·base)
		{"Decorrelated", retry.Decorrelated{}, 1, 0, high, 300 * ms},          //
		{"Decorrelated", retry.Decorrelated{}, 2, 250 * ms, high, 750 * ms},   // 3·prev
		{"Decorrelated", retry.Decorrelated{}, 2, 250 * ms, low, 100 * ms},    // base
		{"Decorrelated", retry.Decorrelated{}, 5, 4 * time.Second, high, cap}, // min(cap, 12s)
		{"None", retry.None{}, 1, 0, high, 100 * ms},
		{"None", retry.None{}, 3, 0, low, 400 * ms},
		{"None", retry.None{}, 70, 0, low, cap},
		{"GRPC", retry.GRPC{}, 1, 0, low, 80 * ms},                          // 100ms · 0.8
		{"GRPC", retry.GRPC{}, 1, 0, high, 120 * ms},                        // 100ms · 1.2
		{"GRPC", retry.GRPC{}, 2, 0, high, 192 * ms},                        // 160ms · 1.2
		{"GRPC", retry.GRPC{Multiplier: 2}, 3, 0, low, 320 * ms},            // 400ms · 0.8
		{"GRPC", retry.GRPC{}, 20, 0, high, 6 * time.Second},                // cap · 1.2, as A6 and grpc-go
		{"GRPC", retry.GRPC{Multiplier: 1e300}, 9, 0, low, 4 * time.Second}, // Inf capped
	}
	for _, tt := range tests {
		got := tt.s.Delay(tt.n, tt.prev, base, cap, tt.r)
		if got != tt.want {
			t.Errorf("%s.Delay(n=%d, prev=%v, rand=%v) = %v; want %v", tt.name, tt.n, tt.prev, float64(tt.r), got, tt.want)
		}
	}
}

func TestStrategies_StayInRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, cap := 10*ms, 2*time.Second
	for _, s := range []retry.Strategy{retry.Full{}, retry.Equal{}, retry.Decorrelated{}, retry.None{}, retry.GRPC{}} {
		prev := time.Duration(0)
		for n := 1; n <= 200; n++ {
			d := s.Delay(n, prev, base, cap, r)
			if d < 0 || d > cap*12/10 {
				t.Fatalf("%T.Delay(%d) = %v; want within [0, 1.2·cap]", s, n, d)
			}
			prev = d
		}
	}
}

// TestFull_MeanIsHalfTheWindow draws many delays with a fixed seed: full jitter is
// uniform over [0, window), so its mean is window/2.
func TestFull_MeanIsHalfTheWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	const draws = 200_000
	window := 800 * ms // retry 4 with base 100ms
	var sum float64
	for range draws {
		sum += float64(retry.Full{}.Delay(4, 0, 100*ms, 5*time.Second, r))
	}
	mean := time.Duration(sum / draws)
	// The standard error of the mean is window/√(12·draws) ≈ 0.5ms; allow 5ms.
	if d := mean - window/2; d < -5*ms || d > 5*ms {
		t.Errorf("mean of %d Full delays = %v; want %v ± 5ms", draws, mean, window/2)
	}
}

// TestGRPC_AsA6ReadsMaxBackoff: the GRPC strategy alone takes a Cap below Base (every
// delay at Cap, jittered), and the retry loop lets its delays pass Cap by up to 20 %.
func TestGRPC_AsA6ReadsMaxBackoff(t *testing.T) {
	if _, err := retry.New(retry.Options{Base: time.Second, Cap: 100 * time.Millisecond}); err == nil {
		t.Errorf("New(Base 1s, Cap 100ms) with Full: nil error; want Cap below Base refused")
	}
	r, err := retry.New(retry.Options{Base: time.Second, Cap: 100 * time.Millisecond, Strategy: retry.GRPC{}})
	if err != nil {
		t.Fatalf("New(Base 1s, Cap 100ms, GRPC) = %v; want it taken as A6's initialBackoff and maxBackoff", err)
	}
	sleeps := r.ExplainStage().Sleeps
	if len(sleeps) == 0 || sleeps[0].Max != 120*time.Millisecond || sleeps[0].Min != 80*time.Millisecond {
		t.Errorf("GRPC sleeps %+v; want the first in [80ms, 120ms]: maxBackoff jittered ±20 %%", sleeps)
	}
}
