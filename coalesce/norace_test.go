//go:build !race

package coalesce_test

const raceEnabled = false
