package policytest

import (
	"fmt"
	"sync"
)

// Rand is a fake [jitter.Rand] for tests. Float64 returns the values it was given
// in turn, then repeats the last one. So jitter is exactly what the test says.
//
// A Rand is safe for concurrent use. Its zero value is not usable; use [NewRand].
type Rand struct {
	mu     sync.Mutex // guards next
	values []float64
	next   int
}

// NewRand returns a Rand that draws values in order. Each value must be in [0, 1),
// as jitter.Rand promises. NewRand panics otherwise, and if there are none.
func NewRand(values ...float64) *Rand {
	if len(values) == 0 {
		panic("policytest: NewRand needs at least one value")
	}
	for _, v := range values {
		if !(v >= 0 && v < 1) {
			panic(fmt.Sprintf("policytest: NewRand value %v; want one in [0, 1)", v))
		}
	}
	return &Rand{values: append([]float64(nil), values...)}
}

// Float64 returns the next value.
func (r *Rand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.values[min(r.next, len(r.values)-1)]
	r.next++
	return v
}
