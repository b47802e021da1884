package doccheck_test

import (
	"go/doc"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleLink is a Markdown link to an Example in a test file.
var exampleLink = regexp.MustCompile(`\[(Example\w*)\]\(([^)#\s]+_test\.go)\)`)

// TestOutputsAreTheirExamples: a block of output whose line before links to an
// Example ([ExampleLoader_Reload](../config/example_reload_test.go)) is that Example's
// // Output:, which go test checks. Output shown beside an Example cannot drift from it.
func TestOutputsAreTheirExamples(t *testing.T) {
	checked := 0
	for _, md := range markdown(t) {
		for _, b := range fences(t, md) {
			m := exampleLink.FindStringSubmatch(b.before)
			if b.lang != "" || m == nil {
				continue
			}
			file := path.Join(path.Dir(md), m[2])
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ParseComments)
			if err != nil {
				t.Errorf("%v: %v", b, err)
				continue
			}
			var ex *doc.Example
			for _, e := range doc.Examples(f) {
				if "Example"+e.Name == m[1] {
					ex = e
				}
			}
			switch {
			case ex == nil:
				t.Errorf("%v: %s has no %s", b, file, m[1])
			case strings.TrimSpace(ex.Output) != strings.TrimSpace(b.text):
				t.Errorf("%v: the block is not the output of %s in %s; it prints\n%s", b, m[1], file, ex.Output)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no output block beside a linked Example; want at least docs/configuration.md's reload")
	}
}
