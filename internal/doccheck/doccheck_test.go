// Package doccheck_test keeps the Go code shown in the README, in the guides under
// docs/ and in every package's documentation compiling: each Go block must be quoted
// from an Example or a test, which the compiler checks, so that an API change that
// breaks a block fails CI. It also runs the README's quick start, checks that output
// shown beside an Example is that Example's, and that every relative link resolves.
package doccheck_test

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, from this package's folder.
const root = "../.."

// A block is one piece of code shown in documentation.
type block struct {
	file   string // relative to root
	line   int
	text   string
	lang   string // Markdown: the fence's language, "" for none
	before string // Markdown: the last non-empty line before the block
}

func (b block) String() string {
	first, _, _ := strings.Cut(strings.TrimSpace(b.text), "\n")
	return fmt.Sprintf("%s:%d: %s", b.file, b.line, first)
}

// markdown returns the Markdown files whose Go blocks are checked: the README and
// every guide under docs/.
func markdown(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("docs/ holds no guide; want the guides the README links to")
	}
	out := []string{"README.md"}
	for _, g := range guides {
		rel, _ := filepath.Rel(root, g)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// fences returns the fenced blocks of a Markdown file, each with its language.
func fences(t *testing.T, path string) []block {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	var bs []block
	var cur *block
	before := ""
	for i, l := range strings.Split(string(src), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(strings.TrimSpace(l), "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))
			cur = &block{file: path, line: i + 2, lang: lang, before: before}
		case cur != nil && strings.TrimSpace(l) == "```":
			bs = append(bs, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		case strings.TrimSpace(l) != "":
			before = strings.TrimSpace(l)
		}
	}
	return bs
}

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(t *testing.T, path string) []block {
	t.Helper()
	var out []block
	for _, b := range fences(t, path) {
		if b.lang == "go" {
			out = append(out, b)
		}
	}
	return out
}

// docBlocks returns the code blocks of the package comment of a Go file.
func docBlocks(t *testing.T, path string) []block {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, path), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		return nil
	}
	start := fset.Position(f.Doc.Pos()).Line
	text := f.Doc.Text()
	var p comment.Parser
	var bs []block
	for _, c := range p.Parse(text).Content {
		code, ok := c.(*comment.Code)
		if !ok {
			continue
		}
		line := start
		if i := strings.Index(text, strings.SplitN(code.Text, "\n", 2)[0]); i >= 0 {
			line += strings.Count(text[:i], "\n")
		}
		bs = append(bs, block{file: path, line: line, text: code.Text})
	}
	return bs
}

// isGo reports whether a block is Go: a file, declarations or statements that parse.
// A block that does not parse but reads like Go (:= or func) is an error: a block
// must not drift out of Go unnoticed.
func isGo(b block) (bool, error) {
	src := b.text
	if _, err := parser.ParseFile(token.NewFileSet(), "", src, 0); err == nil {
		return true, nil
	}
	if f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, 0); err == nil {
		return len(f.Decls) > 0, nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+src+"\n}", 0)
	if err == nil {
		return len(f.Decls[0].(*ast.FuncDecl).Body.List) > 0, nil
	}
	if strings.Contains(src, ":=") || strings.Contains(src, "func ") {
		return false, fmt.Errorf("reads like Go but does not parse: %v", err)
	}
	return false, nil
}

var space = regexp.MustCompile(`\s+`)

// lines returns the non-empty lines of s, trimmed, runs of blanks made one space.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(space.ReplaceAllString(l, " ")); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// quotes reports whether the lines of b appear, in order, among the lines of src.
func quotes(src, b []string) bool {
	i := 0
	for _, l := range src {
		if i < len(b) && l == b[i] {
			i++
		}
	}
	return i == len(b)
}

// sources returns, for every Example and Test function of the _test.go files under
// dir (the folder itself only, unless deep), its lines; a whole test file counts as
// one source too, for blocks that show a file.
func sources(t *testing.T, dir string, deep bool) [][]string {
	t.Helper()
	var out [][]string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != filepath.Join(root, dir) && (!deep || strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		out = append(out, lines(string(src)))
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !(strings.HasPrefix(fn.Name.Name, "Example") || strings.HasPrefix(fn.Name.Name, "Test")) {
				continue
			}
			body := src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]
			out = append(out, lines(string(body)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testFiles returns the text of every _test.go file of the repository.
func testFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, string(src))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readByTest reports whether a test reads a Markdown block itself, finding it by the
// line before it, which it then names as a Go string: such a test builds the block
// whole (a program with its own main, say).
func readByTest(b block, files []string) bool {
	if b.before == "" {
		return false
	}
	for _, f := range files {
		if strings.Contains(f, strconv.Quote(b.before)) {
			return true
		}
	}
	return false
}

func quoted(b block, srcs [][]string) bool {
	want := lines(b.text)
	for _, s := range srcs {
		if quotes(s, want) {
			return true
		}
	}
	return false
}

// TestDocsCompile: every Go block of README.md, of the guides in docs/ and of every
// package comment is quoted, line by line and in order, from one Example or test
// function (or test file) — of the package itself for a package comment, of any
// package for Markdown — so that the compiler checks what the documentation shows. A
// Markdown block may instead be read whole by a test that finds it by the line before
// it: the README's quick start, which TestQuickStart runs, and the backstopvet sample
// program in docs/cli.md, which cmd/backstopvet's TestREADMEProgram builds and checks.
func TestDocsCompile(t *testing.T) {
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") && !strings.HasSuffix(d.Name(), "_test.go") {
			rel, _ := filepath.Rel(root, path)
			docs = append(docs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 100 {
		t.Fatalf("found %d Go files; want the repository's", len(docs))
	}
	checked := 0
	check := func(b block, srcs [][]string) {
		ok, err := isGo(b)
		if err != nil {
			t.Errorf("%v: %v", b, err)
			return
		}
		if !ok {
			return
		}
		checked++
		if !quoted(b, srcs) {
			t.Errorf("%v: this Go block is quoted from no Example or test, so nothing compiles it; "+
				"copy it into one (its lines in order) or change it to match the one that shows it", b)
		}
	}
	all := sources(t, ".", true)
	files := testFiles(t)
	mds := markdown(t)
	for _, md := range mds {
		for _, b := range goBlocks(t, md) {
			if readByTest(b, files) {
				checked++
				continue
			}
			check(b, all)
		}
	}
	for _, path := range docs {
		srcs := sources(t, filepath.Dir(path), false)
		for _, b := range docBlocks(t, path) {
			check(b, srcs)
		}
	}
	t.Logf("%d Go blocks checked in %d Markdown files and the package comments of %d Go files", checked, len(mds), len(docs))
}

// TestQuotes: a block drifted from its Example, by one changed line, is not quoted.
func TestQuotes(t *testing.T) {
	src := lines("func Example() {\n\tp, err := policy.Wrap(overall, rt)\n\tif err != nil {\n\t\treturn\n\t}\n\t_ = p.Do(ctx, fn)\n}")
	for _, tt := range []struct {
		block string
		want  bool
	}{
		{"p, err := policy.Wrap(overall,   rt)\n_ = p.Do(ctx, fn)", true},
		{"p, err := policy.Wrap(overall, rt, policy.Name(\"db\"))\n_ = p.Do(ctx, fn)", false},
		{"_ = p.Do(ctx, fn)\np, err := policy.Wrap(overall, rt)", false},
	} {
		if got := quotes(src, lines(tt.block)); got != tt.want {
			t.Errorf("quotes(%q) = %v; want %v", tt.block, got, tt.want)
		}
	}
	for _, tt := range []struct {
		text string
		want bool
		bad  bool
	}{
		{"x := f()\n", true, false},
		{"| a | b |\n|---|---|\n", false, false},
		{"//backstopvet:ignore retryloop (why)\n", false, false},
		{"x := f(\n...\n", false, true},
		{"package main\n\nfunc main() {}\n", true, false},
	} {
		got, err := isGo(block{text: tt.text})
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("isGo(%q) = %v, %v; want %v, error %v", tt.text, got, err, tt.want, tt.bad)
		}
	}
}
