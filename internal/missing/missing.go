// Package missing makes a test skipped for want of an installed component (Chromium,
// promtool, redis-server, PostgreSQL) visible without -v. go test shows nothing of a
// passing package but its "ok" line, so [Skip] also writes one line to the go
// command's own output, where the run's reader sees it:
//
//	backstop: chromium is not installed: github.com/backstop-go/backstop/browsertest skipped the tests that need it (apt-get install chromium)
//
// The module runner (internal/moduletest) passes such lines on from nested modules,
// from their cached runs too. A root package's line shows when its tests run, not
// when go test replays a cached result.
package missing

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Prefix starts every line Skip writes; the module runner looks for it.
const Prefix = "backstop: "

var said sync.Map // component → struct{}: one line per component and process

// Skip skips t, saying component is not installed and how to install it. The first
// Skip of a component in a process also writes one line to the go command's output.
func Skip(t testing.TB, component, install string) {
	t.Helper()
	line := fmt.Sprintf("%s%s is not installed: %s skipped the tests that need it (%s)",
		Prefix, component, pkg(), install)
	if _, dup := said.LoadOrStore(component, struct{}{}); !dup {
		Say(line)
	}
	t.Skip(line) // the module runner finds it here, in a cached run's output too
}

// Find returns the lines of go test -v output that Skip wrote, each once.
func Find(out string) []string {
	var lines []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		i := strings.Index(l, Prefix)
		if i < 0 {
			continue
		}
		if l = strings.TrimSpace(l[i:]); !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	return lines
}

// Say writes line to the output of the go command that runs this test binary: its
// parent's standard output, on Linux. Elsewhere, or when that cannot be opened, the
// line goes to standard error, which go test -v shows.
func Say(line string) {
	line = strings.TrimRight(line, "\n") + "\n"
	if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		defer f.Close()
		if _, err := f.WriteString(line); err == nil {
			return
		}
	}
	fmt.Fprint(os.Stderr, line)
}

// pkg returns the import path of the test binary's package, from its build info.
func pkg() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return "a package"
}
