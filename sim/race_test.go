//go:build race

package sim_test

// raceEnabled shortens the long runs under the race detector, which makes every
// simulated event some ten times dearer.
const raceEnabled = true
