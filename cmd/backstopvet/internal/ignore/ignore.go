package ignore

import (
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Lines returns a function that reports whether check is silenced at pos.
func Lines(pass *analysis.Pass, check string) func(pos token.Pos) bool {
	marked := map[string]map[int]bool{}
	for _, f := range pass.Files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.Contains(c.Text, "backstopvet:ignore "+check) {
					p := pass.Fset.Position(c.Pos())
					if marked[p.Filename] == nil {
						marked[p.Filename] = map[int]bool{}
					}
					marked[p.Filename][p.Line] = true
				}
			}
		}
	}
	return func(pos token.Pos) bool {
		p := pass.Fset.Position(pos)
		return marked[p.Filename][p.Line] || marked[p.Filename][p.Line-1]
	}
}
