package policy

import "math/rand/v2"

// Rand is the library's one seam for randomness: every package that draws jitter takes a
// Rand in its Options, where nil means [SystemRand]. Tests use a fixed source (package
// policytest has one).
//
// Implementations must be safe for concurrent use.
type Rand interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// SystemRand returns math/rand/v2's global source, which is safe for concurrent use.
func SystemRand() Rand { return systemRand{} }

// RandOr returns r, or [SystemRand] if r is nil. Packages call it once in New.
func RandOr(r Rand) Rand {
	if r == nil {
		return systemRand{}
	}
	return r
}

type systemRand struct{}

func (systemRand) Float64() float64 { return rand.Float64() }
