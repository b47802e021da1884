//go:build race

package coalesce_test

// raceEnabled is true under the race detector, which allows at most 8 128 goroutines
// alive at once: the load tests scale their callers down to fit.
const raceEnabled = true
