package jitter_test

import (
	"fmt"

	"github.com/backstop-go/backstop/jitter"
)

// Two sources made with the same seeds draw the same sequence. So a simulation or a
// chaos run replays exactly from its seeds.
func ExampleSeeded() {
	a, b := jitter.Seeded(1, 2), jitter.Seeded(1, 2)
	for range 3 {
		x, y := a.Float64(), b.Float64()
		fmt.Printf("%.4f %.4f %v\n", x, y, x == y)
	}
	// Output:
	// 0.6765 0.6765 true
	// 0.4614 0.4614 true
	// 0.5085 0.5085 true
}
