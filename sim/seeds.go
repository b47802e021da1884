package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxSeeds bounds the seeds ParseSeeds accepts from one range.
const MaxSeeds = 1000

// ParseSeeds reads seeds as the commands take them: one ("7"), a range ("1-5") or a
// list ("1,4,7").
func ParseSeeds(s string) ([]uint64, error) {
	if from, to, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.ParseUint(from, 10, 64)
		b, err2 := strconv.ParseUint(to, 10, 64)
		if err1 != nil || err2 != nil || b < a || b-a >= MaxSeeds {
			return nil, errors.New(`want a range "a-b" with a ≤ b, at most 1 000 seeds`)
		}
		var seeds []uint64
		for n := a; n <= b; n++ {
			seeds = append(seeds, n)
		}
		return seeds, nil
	}
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a seed", f)
		}
		seeds = append(seeds, n)
	}
	return seeds, nil
}
