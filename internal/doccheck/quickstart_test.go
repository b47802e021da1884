package doccheck_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// quickStart is the line the README puts before its quick start program.
const quickStart = "A program that calls a flaky dependency through a deadline, a breaker and a retry:"

// TestQuickStart builds the README's quick start as it stands, a program in a module
// of its own that requires this tree, runs it and compares what it prints with the
// block the README shows after it. A newcomer who copies both sees the same.
func TestQuickStart(t *testing.T) {
	bs := fences(t, "README.md")
	i := 0
	for i < len(bs) && !(bs[i].lang == "go" && bs[i].before == quickStart) {
		i++
	}
	if i+1 >= len(bs) {
		t.Fatalf("README.md has no go block after %q followed by its output", quickStart)
	}
	program, output := bs[i], bs[i+1]
	if output.lang != "" || output.before != "It prints:" {
		t.Fatalf("%v: the block after the quick start is %q after %q; want its output after \"It prints:\"",
			output, output.lang, output.before)
	}

	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(abs, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string]string{
		"go.mod": "module quickstart\n\ngo 1.25.0\n\nrequire github.com/backstop-go/backstop v0.0.0\n\n" +
			"replace github.com/backstop-go/backstop => " + abs + "\n",
		"go.sum":  string(sum),
		"main.go": program.text,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".")
	cmd.Dir = dir
	// The module cache holds the library's requirements; nothing is fetched.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run of the README's quick start: %v\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != output.text {
		t.Errorf("the README's quick start prints\n%s\nthe README says it prints\n%s", got, output.text)
	}
}
