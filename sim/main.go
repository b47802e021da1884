package sim

import (
	"os"
	"regexp"
	"testing"
)

// Main runs fn as the one test of testing.Main and exits the process with the code fn
// returns. It is how a command gets the *testing.T that [Run] needs (a synctest
// bubble belongs to a test): testing.Main is the standard library's way for a program
// to act as a test binary, so none needs to be built. Call it from main, after the
// command has read its own flags: testing.Main parses os.Args for test flags, so Main
// hands it none. Nothing the testing package prints reaches standard output: the
// process exits from within the test, before the summary line.
func Main(fn func(t *testing.T) int) {
	os.Args = os.Args[:1]
	testing.Main(func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) },
		[]testing.InternalTest{{Name: "sim", F: func(t *testing.T) { os.Exit(fn(t)) }}}, nil, nil)
	os.Exit(1) // testing.Main exits; not reached
}
