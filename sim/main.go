package sim

import (
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"testing"
)

// Main runs fn as the one test of testing.Main and exits the process with the code fn
// returns. It is how a command gets the *testing.T that [Run] needs (a synctest
// bubble belongs to a test): testing.Main is the standard library's way for a program
// to act as a test binary, so none needs to be built. Call it from main, after the
// command has read its own flags: testing.Main parses os.Args for test flags, so Main
// hands it none. Nothing the testing package prints reaches standard output: the
// process exits from within the test, before the summary line.
//
// Main tunes the process for runs, which are serial by design (see [Tune]).
func Main(fn func(t *testing.T) int) {
	Tune()
	os.Args = os.Args[:1]
	testing.Main(func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) },
		[]testing.InternalTest{{Name: "sim", F: func(t *testing.T) { os.Exit(fn(t)) }}}, nil, nil)
	os.Exit(1) // testing.Main exits; not reached
}

// Tune sets the process up for simulated runs, unless the environment says
// otherwise: GOMAXPROCS 1 (a run fires one event at a time and waits until every
// goroutine is blocked, so a second processor only adds hand-offs between threads:
// the 1 000-service run takes about a third less wall time on one) and GOGC 800 (a run's
// garbage is short-lived and its live heap small: the 1 000-service run collects half
// as often as at 400, for some 6 % less CPU per call, and peaks at about 0.3 GB of
// memory at 4·10⁵ calls rather than 0.2). The figures are the same whatever the
// setting. The commands call it through [Main]; a test may call
// it (it affects the whole test binary) and restore the settings with the function it
// returns.
func Tune() (restore func()) {
	procs, gc := -1, -1
	if os.Getenv("GOMAXPROCS") == "" {
		procs = runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		gc = debug.SetGCPercent(800)
	}
	return func() {
		if procs > 0 {
			runtime.GOMAXPROCS(procs)
		}
		if gc != -1 {
			debug.SetGCPercent(gc)
		}
	}
}
