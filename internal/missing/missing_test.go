package missing_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/backstop-go/backstop/internal/missing"
)

// TestSkip_SaysSoWithoutV runs a test that skips for a missing component under go
// test without -v, and finds the line in go test's output beside the "ok" line.
func TestSkip_SaysSoWithoutV(t *testing.T) {
	if os.Getenv("MISSING_CHILD") == "1" {
		missing.Skip(t, "a-component-no-machine-has", "apt-get install nothing")
		return
	}
	if testing.Short() {
		t.Skip("builds and runs a test binary: not in -short")
	}
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestSkip_SaysSoWithoutV$", ".")
	cmd.Env = append(os.Environ(), "MISSING_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	want := missing.Prefix + "a-component-no-machine-has is not installed: "
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "(apt-get install nothing)") {
		t.Errorf("go test without -v printed\n%s\nwant a line starting %q", out, want)
	}
	if !strings.Contains(string(out), "ok  \t") {
		t.Errorf("go test without -v printed\n%s\nwant the package's ok line too", out)
	}
}

// TestFind_EachLineOnce finds Skip's lines in go test -v output, whatever precedes
// them on their line, once each.
func TestFind_EachLineOnce(t *testing.T) {
	out := "=== RUN   TestA\n" +
		"    a_test.go:12: backstop: chromium is not installed: p skipped the tests that need it (x)\n" +
		"--- SKIP: TestA (0.00s)\n" +
		"    b_test.go:40: backstop: chromium is not installed: p skipped the tests that need it (x)\n" +
		"backstop: promtool is not installed: q skipped the tests that need it (y)\n" +
		"ok  \tp\t0.01s\n"
	got := missing.Find(out)
	want := []string{
		"backstop: chromium is not installed: p skipped the tests that need it (x)",
		"backstop: promtool is not installed: q skipped the tests that need it (y)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Find = %q; want %q", got, want)
	}
}
