package retryloop

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"

	"github.com/backstop-go/backstop/cmd/backstopvet/internal/ignore"
)

// Analyzer is the retryloop check.
var Analyzer = &analysis.Analyzer{
	Name:     "retryloop",
	Doc:      "reports retry loops that sleep a fixed interval without jitter (and without a bound), which Backstop's retry does right",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      run,
}

// sleepers are the calls that wait between iterations.
var sleepers = map[string]bool{"time.Sleep": true, "time.After": true, "time.NewTimer": true, "time.Tick": true, "time.NewTicker": true}

// randomPkgs are where randomness comes from; a call into Backstop's retry package
// (a Strategy's Delay) counts too.
var randomPkgs = map[string]bool{"math/rand": true, "math/rand/v2": true, "crypto/rand": true,
	"github.com/backstop-go/backstop/retry": true}

func run(pass *analysis.Pass) (any, error) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ignored := ignore.Lines(pass, "retryloop")
	ins.Preorder([]ast.Node{(*ast.ForStmt)(nil)}, func(n ast.Node) {
		loop := n.(*ast.ForStmt)
		if ignored(loop.Pos()) {
			return
		}
		var sleeps, calls, random, usesCtx bool
		ast.Inspect(loop.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // another function's body: its own loops are judged alone
			case *ast.CallExpr:
				name, fn := callee(pass.TypesInfo, n)
				switch {
				case sleepers[name]:
					sleeps = true
				case fn != nil && fn.Pkg() != nil && randomPkgs[fn.Pkg().Path()]:
					random = true
				case isDependencyCall(fn):
					calls = true
				}
			case *ast.SelectorExpr:
				if sel, ok := pass.TypesInfo.Selections[n]; ok {
					if p := sel.Obj().Pkg(); p != nil && randomPkgs[p.Path()] {
						random = true // a method of *rand.Rand
					}
				}
				if t := pass.TypesInfo.TypeOf(n.X); t != nil && isContext(t) && (n.Sel.Name == "Done" || n.Sel.Name == "Err") {
					usesCtx = true
				}
			}
			return true
		})
		if !sleeps || !calls || random {
			return
		}
		msg := "retry loop sleeps a fixed interval with no jitter: clients that fail together retry together; " +
			"use retry.New (jittered backoff, budget- and deadline-aware) from github.com/backstop-go/backstop/retry"
		if loop.Cond == nil && !usesCtx {
			msg = "retry loop with no attempt bound and no deadline sleeps a fixed interval with no jitter: it retries forever, " +
				"in step with every other client; use retry.New (MaxAttempts, a deadline, jittered backoff) from github.com/backstop-go/backstop/retry"
		}
		pass.Reportf(loop.Pos(), "%s", msg)
	})
	return nil, nil
}

// callee returns "pkg.Name" for a package-level function and the called function.
func callee(info *types.Info, call *ast.CallExpr) (string, *types.Func) {
	var id *ast.Ident
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		id = fn.Sel
	default:
		return "", nil
	}
	f, ok := info.Uses[id].(*types.Func)
	if !ok || f.Pkg() == nil {
		return "", nil
	}
	if f.Type().(*types.Signature).Recv() != nil {
		return "", f
	}
	return f.Pkg().Path() + "." + f.Name(), f
}

// isDependencyCall reports whether fn is an *http.Client method that sends a request,
// or takes a context.Context first and returns an error last.
func isDependencyCall(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	sig := fn.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil {
		if p, ok := recv.Type().(*types.Pointer); ok {
			if named, ok := p.Elem().(*types.Named); ok && named.Obj().Pkg() != nil &&
				named.Obj().Pkg().Path() == "net/http" && named.Obj().Name() == "Client" {
				switch fn.Name() {
				case "Do", "Get", "Post", "Head", "PostForm":
					return true
				}
			}
		}
	}
	params, results := sig.Params(), sig.Results()
	if params.Len() == 0 || results.Len() == 0 || !isContext(params.At(0).Type()) {
		return false
	}
	last := results.At(results.Len() - 1).Type()
	return types.Identical(last, types.Universe.Lookup("error").Type())
}

func isContext(t types.Type) bool {
	named, ok := t.(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "context" && named.Obj().Name() == "Context"
}
