// Package moduletest lets the README's test command, go test -race ./..., test every
// module of the workspace. ./... never leaves the module it is run in, and each
// integration (policygrpc, fleet, the adapters, the simulator…) is a module of its own,
// so the root module holds one small test package per nested module, under
// internal/modules/<the module's folder>, whose one test calls [Run]: it runs go test on
// that module, with the race detector, -short and -v as the outer run has them, and
// fails with the module's output when the module fails.
//
// One package per module, not one test for all: go test bounds each test binary's run
// (10 minutes unless -timeout says otherwise), and the modules together take longer
// than that on a cold two-core machine. As packages they run under go test's own
// parallelism (-p, the number of CPUs), each module's go test with its own -p inside.
//
// go test caches a passing package and replays it while the package's binary and the
// files and environment variables its test read are unchanged. The module is run in
// another process, whose reads go test does not see, so [Run] looks at every file of
// the workspace itself (their sizes and times), at the programs nested tests start
// when installed (redis-server, PostgreSQL, Chromium, promtool), at the storm report
// browsertest checks, and at the variables nested tests read: a change to any runs
// the module's tests again, and the inner go test's own cache decides what is stale
// within it. (-count=1 is not passed on: go test does not tell a test how it was
// asked; clean the inner cache with go clean -testcache.)
package moduletest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/internal/missing"
	"github.com/backstop-go/backstop/internal/race"
)

// modulesDir is where the packages that run a nested module live, relative to the
// workspace root.
const modulesDir = "internal/modules"

// env names the environment variables that nested tests read: a change to one of them
// must run the tests again, so the outer test reads them too (go test keys its cache
// on the variables a test reads).
var env = []string{"PATH", "GOFLAGS", "STORM_REPORT", "CGO_ENABLED", "GOMAXPROCS"}

// tools are the programs nested tests start when they are installed: installing one
// must run the tests that skipped without it again, so the outer test looks them up
// too (go test keys its cache on the files a test looked at, present or not).
var tools = []string{"redis-server", "initdb", "postgres", "chromium", "chromium-browser", "google-chrome", "promtool", "curl"}

// Workspace returns the folder of the go.work the go command uses here, and the
// folders of the modules it uses other than the root's own, relative to it. ok is
// false outside a workspace (GOWORK=off, or the root module taken from a module cache).
func Workspace(t testing.TB) (root string, modules []string, ok bool) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", nil, false
	}
	out, err = exec.Command("go", "work", "edit", "-json", work).Output()
	if err != nil {
		t.Fatalf("go work edit -json %s: %v", work, err)
	}
	var w struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("go work edit -json %s: %v", work, err)
	}
	for _, u := range w.Use {
		if dir := filepath.ToSlash(filepath.Clean(u.DiskPath)); dir != "." {
			modules = append(modules, dir)
		}
	}
	return filepath.Dir(work), modules, true
}

// Run tests the nested module that the calling package stands for: the package in
// internal/modules/policygrpc tests the module in policygrpc. It skips, saying why,
// outside a workspace, where there are no nested modules to test.
func Run(t *testing.T) {
	t.Helper()
	root, modules, ok := Workspace(t)
	if !ok {
		t.Skip("not in the Backstop workspace (go env GOWORK is empty or off): the nested modules are tested from a checkout, where go.work ties them together")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(root, modulesDir), wd)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("moduletest.Run called from %s, outside %s", wd, filepath.Join(root, modulesDir))
	}
	rel = filepath.ToSlash(rel)
	found := false
	for _, m := range modules {
		found = found || m == rel
	}
	if !found {
		t.Fatalf("go.work uses no module in %s; remove %s/%s or add the module to go.work", rel, modulesDir, rel)
	}
	watch(t, root)

	args := []string{"test"}
	if race.Enabled {
		args = append(args, "-race")
	}
	if testing.Short() {
		args = append(args, "-short")
	}
	// Always -v: the reasons of skips, which a cached run replays only with -v, name
	// the components this machine lacks (package missing). Without -v outside, the
	// output is shown only when the module fails.
	args = append(args, "-v")
	if dl, ok := t.Deadline(); ok {
		// The module's run ends before this test's own time bound, so that its
		// output is reported rather than lost with a killed binary.
		if left := time.Until(dl) - 10*time.Second; left > 0 {
			args = append(args, "-timeout", left.Round(time.Second).String())
		}
	}
	args = append(args, "./...")
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = filepath.Join(root, filepath.FromSlash(rel))
	var out bytes.Buffer
	// Verbose: the module's output as it comes, so a reader (or a CI script that
	// looks for skipped tests) sees exactly what go test -v in the module shows.
	var w io.Writer = &out
	if testing.Verbose() {
		w = io.MultiWriter(&out, os.Stdout)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	if !testing.Verbose() {
		passOn(out.Bytes()) // verbose, the module's output was shown already
	}
	tested, untested := count(out.Bytes())
	if err != nil {
		if !testing.Verbose() {
			t.Log(tail(out.String(), 200))
		}
		t.Fatalf("cd %s && go %s: %v", rel, strings.Join(args, " "), err)
	}
	t.Logf("module %s: %d packages tested, %d without tests", rel, tested, untested)
}

// passOn writes again, to the go command's output, each line of the module's that
// says a component is missing (package missing): go test shows nothing else of a
// passing module without -v.
func passOn(out []byte) {
	for _, line := range missing.Find(string(out)) {
		missing.Say(line)
	}
}

// count returns how many packages go test's output says it tested ("ok" or "FAIL"
// lines) and how many had no test files ("?").
func count(out []byte) (tested, untested int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ok  \t"), strings.HasPrefix(line, "FAIL\t"):
			tested++
		case strings.HasPrefix(line, "?   \t"):
			untested++
		}
	}
	return tested, untested
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d lines before", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// watch makes go test's cache of the calling test depend on every file of the
// workspace and on the variables in env: it looks at each, and go test records what a
// test looks at. Version control's own folder and reports written by the examples are
// left out.
func watch(t *testing.T, root string) {
	t.Helper()
	for _, k := range env {
		os.Getenv(k)
	}
	for _, tool := range tools {
		_, _ = exec.LookPath(tool)
	}
	pg, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	for _, p := range append(pg, "/usr/lib/postgresql") {
		_, _ = os.Stat(p)
	}
	if dir := os.Getenv("STORM_REPORT"); dir != "" {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				_, _ = os.Stat(path)
			}
			return nil
		})
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "storm-report", "testdata-out":
				return filepath.SkipDir
			}
			return nil
		}
		_, err = os.Stat(path)
		return err
	})
	if err != nil {
		t.Fatalf("looking at the workspace's files: %v", err)
	}
}
