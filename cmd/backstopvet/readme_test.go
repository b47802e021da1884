package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/backstop-go/backstop/cmd/backstopvet/retryloop"
	"github.com/backstop-go/backstop/cmd/backstopvet/wraporder"
)

// guide is the Markdown file that shows the sample program and its findings.
const guide = "docs/cli.md"

// fence returns the first fenced block of md after the line holding marker.
func fence(t *testing.T, md, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, marker)
	if !ok {
		t.Fatalf("%s has no %q", guide, marker)
	}
	_, rest, ok = strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s has no code block after %q", guide, marker)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s's block after %q is not closed", guide, marker)
	}
	return body
}

// collect is an analysistest.Testing that keeps what it is told.
type collect struct{ errs []string }

func (c *collect) Errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// TestREADMEProgram builds the sample program of docs/cli.md against the real library,
// in a module of its own, runs both checks on it and compares what they say with the
// guide's "it says" block: the program compiles, and its findings are the guide's.
func TestREADMEProgram(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("../..", guide))
	if err != nil {
		t.Fatal(err)
	}
	program := fence(t, string(md), "On this program:")
	says := fence(t, string(md), "it says:")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string]string{
		"go.mod": "module readme\n\ngo 1.26.0\n\nrequire github.com/backstop-go/backstop v0.0.0\n\n" +
			"replace github.com/backstop-go/backstop => " + root + "\n",
		"go.sum":  string(sum),
		"main.go": program,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off") // the module cache has the library's requirements

	var got []string
	for _, a := range []*analysis.Analyzer{retryloop.Analyzer, wraporder.Analyzer} {
		c := &collect{}
		for _, r := range analysistest.Run(c, dir, a, "./...") {
			if r.Err != nil {
				t.Fatalf("%s: %v", a.Name, r.Err)
			}
			for _, d := range r.Diagnostics {
				p := r.Pass.Fset.Position(d.Pos)
				got = append(got, fmt.Sprintf("%s:%d:%d: %s", filepath.Base(p.Filename), p.Line, p.Column, d.Message))
			}
		}
		for _, e := range c.errs {
			if !strings.Contains(e, "unexpected diagnostic") { // the README program has no want comments
				t.Errorf("%s: %s", a.Name, e)
			}
		}
	}
	want := strings.Split(strings.TrimSpace(says), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("on the program in %s the checks say\n%s\nthe guide says\n%s", guide, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
