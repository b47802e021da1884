package callpath_test

import (
	"fmt"
	"time"

	"github.com/backstop-go/backstop/callpath"
)

func ExampleParseRetryAfter() {
	now := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 12:00:30 GMT", "-5", "soon"} {
		d, ok := callpath.ParseRetryAfter(v, now)
		fmt.Printf("%q → %v %v\n", v, d, ok)
	}
	// Output:
	// "120" → 2m0s true
	// "Sun, 01 Mar 2026 12:00:30 GMT" → 30s true
	// "-5" → 0s false
	// "soon" → 0s false
}
