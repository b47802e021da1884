//go:build !race

// Package race reports whether the race detector is on, so allocation tests can skip
// under -race (it makes allocations of its own).
package race

// Enabled is true when the binary is built with -race.
const Enabled = false
