package jitter

import (
	"math/rand/v2"
	"sync"
)

// Rand is the library's one seam for randomness. Every package that draws jitter
// takes a Rand in its Options. There, nil means [System]. Tests use a fixed source;
// package policytest has one.
//
// Implementations must be safe for concurrent use.
type Rand interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// System returns math/rand/v2's global source, which is safe for concurrent use.
func System() Rand { return systemRand{} }

// Seeded returns a Rand drawing from a PCG generator seeded with seed1 and seed2.
// It is safe for concurrent use. The same seeds give the same sequence. So a
// simulation, a chaos run or a replay is reproducible. Concurrent callers still
// interleave in the order they arrive.
func Seeded(seed1, seed2 uint64) Rand {
	return &seededRand{r: rand.New(rand.NewPCG(seed1, seed2))}
}

type seededRand struct {
	mu sync.Mutex // guards r
	r  *rand.Rand
}

func (s *seededRand) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Float64()
}

// Or returns r, or [System] if r is nil. Packages call it once in New.
func Or(r Rand) Rand {
	if r == nil {
		return systemRand{}
	}
	return r
}

type systemRand struct{}

func (systemRand) Float64() float64 { return rand.Float64() }
