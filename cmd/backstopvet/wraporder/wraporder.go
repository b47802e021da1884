package wraporder

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"

	"github.com/backstop-go/backstop/cmd/backstopvet/internal/ignore"
	"github.com/backstop-go/backstop/policy"
)

// Analyzer is the wraporder check.
var Analyzer = &analysis.Analyzer{
	Name:     "wraporder",
	Doc:      "reports policy.Wrap and policy.MustWrap calls whose stack breaks Backstop's ordering rules O1–O7",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      run,
}

const module = "github.com/backstop-go/backstop/"

// constructors maps Backstop's constructors to the kind of policy they return.
var constructors = map[string]policy.Kind{
	module + "deadline.New": policy.KindDeadline, module + "deadline.MustNew": policy.KindDeadline,
	module + "deadline.PerAttempt": policy.KindAttemptTimeout, module + "deadline.MustPerAttempt": policy.KindAttemptTimeout,
	module + "retry.New": policy.KindRetry, module + "retry.MustNew": policy.KindRetry,
	module + "retry.NewHedge": policy.KindRetry, module + "retry.MustNewHedge": policy.KindRetry,
	module + "breaker.New": policy.KindBreaker, module + "breaker.MustNew": policy.KindBreaker,
	module + "shed.New": policy.KindShed, module + "shed.MustNew": policy.KindShed,
	module + "budget.NewTokenBucket": policy.KindBudget, module + "budget.MustNewTokenBucket": policy.KindBudget,
	module + "budget.ParseTokenBucket": policy.KindBudget,
	module + "budget.NewRatio":         policy.KindBudget, module + "budget.MustNewRatio": policy.KindBudget,
	module + "budget.NewRate": policy.KindBudget, module + "budget.MustNewRate": policy.KindBudget,
	module + "budget.NewRetryQuota": policy.KindBudget, module + "budget.MustNewRetryQuota": policy.KindBudget,
	module + "budget.NewInFlight": policy.KindBudget, module + "budget.MustNewInFlight": policy.KindBudget,
	module + "fleet.NewBreaker": policy.KindBreaker,
	module + "fleet.NewRatio":   policy.KindBudget, module + "fleet.NewTokenBucket": policy.KindBudget,
	module + "throttle.New": policy.KindThrottle, module + "throttle.MustNew": policy.KindThrottle,
	module + "fallback.New": policy.KindFallback, module + "fallback.MustNew": policy.KindFallback,
	module + "bulkhead.New": policy.KindBulkhead, module + "bulkhead.MustNew": policy.KindBulkhead,
	module + "ratelimit.New": policy.KindRateLimit, module + "ratelimit.MustNew": policy.KindRateLimit,
	module + "chaos.New": policy.KindOther, module + "chaos.MustNew": policy.KindOther,
}

// options are the constructors of policy.Option, which Wrap takes among its stages and
// sets aside: positions count the stages only.
var options = map[string]bool{module + "policy.Name": true, module + "policy.Observe": true, module + "policy.UseClock": true}

// calleeName returns "pkgpath.Name" of a call to a package-level function, or "".
func calleeName(info *types.Info, call *ast.CallExpr) string {
	var id *ast.Ident
	fun := ast.Unparen(call.Fun)
	switch x := fun.(type) { // a generic function instantiated by hand: fallback.New[T]
	case *ast.IndexExpr:
		fun = x.X
	case *ast.IndexListExpr:
		fun = x.X
	}
	switch fn := fun.(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		id = fn.Sel
	default:
		return ""
	}
	f, ok := info.Uses[id].(*types.Func)
	if !ok || f.Pkg() == nil || f.Type().(*types.Signature).Recv() != nil {
		return ""
	}
	return f.Pkg().Path() + "." + f.Name()
}

func run(pass *analysis.Pass) (any, error) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)

	// Variables assigned once from a constructor, with the kind they hold. A variable
	// assigned more than once, or from anything else, is unknown.
	kinds := map[types.Object]policy.Kind{}
	unknown := map[types.Object]bool{}
	note := func(lhs ast.Expr, rhs ast.Expr) {
		id, ok := lhs.(*ast.Ident)
		if !ok || id.Name == "_" {
			return
		}
		obj := pass.TypesInfo.ObjectOf(id)
		if obj == nil {
			return
		}
		call, ok := ast.Unparen(rhs).(*ast.CallExpr)
		k, known := policy.Kind(0), false
		if ok {
			k, known = constructors[calleeName(pass.TypesInfo, call)]
		}
		if _, seen := kinds[obj]; seen || !known {
			unknown[obj] = true
			return
		}
		kinds[obj] = k
	}
	ins.Preorder([]ast.Node{(*ast.AssignStmt)(nil), (*ast.ValueSpec)(nil)}, func(n ast.Node) {
		switch n := n.(type) {
		case *ast.AssignStmt:
			switch {
			case len(n.Lhs) == len(n.Rhs):
				for i := range n.Lhs {
					note(n.Lhs[i], n.Rhs[i])
				}
			case len(n.Rhs) == 1: // x, err := deadline.New(…)
				note(n.Lhs[0], n.Rhs[0])
				for _, l := range n.Lhs[1:] {
					if id, ok := l.(*ast.Ident); ok {
						if obj := pass.TypesInfo.ObjectOf(id); obj != nil {
							unknown[obj] = true
						}
					}
				}
			}
		case *ast.ValueSpec:
			switch {
			case len(n.Names) == len(n.Values):
				for i := range n.Names {
					note(n.Names[i], n.Values[i])
				}
			case len(n.Values) == 1:
				note(n.Names[0], n.Values[0])
			}
		}
	})

	ignored := ignore.Lines(pass, "wraporder")
	ins.Preorder([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node) {
		call := n.(*ast.CallExpr)
		if ignored(call.Pos()) {
			return
		}
		switch calleeName(pass.TypesInfo, call) {
		case module + "policy.Wrap", module + "policy.MustWrap":
		default:
			return
		}
		if call.Ellipsis.IsValid() {
			return // Wrap(stack...): not known statically
		}
		stack := make([]policy.Kind, 0, len(call.Args))
		seen := map[types.Object]int{}
		for _, arg := range call.Args {
			switch a := ast.Unparen(arg).(type) {
			case *ast.CallExpr:
				name := calleeName(pass.TypesInfo, a)
				if options[name] {
					continue // an Option among the stages: Wrap takes it out
				}
				k, ok := constructors[name]
				if !ok {
					return
				}
				stack = append(stack, k)
			case *ast.Ident:
				obj := pass.TypesInfo.ObjectOf(a)
				k, ok := kinds[obj]
				if !ok || unknown[obj] {
					return
				}
				if j, dup := seen[obj]; dup {
					pass.Reportf(call.Pos(), "policy: O6: the same %s policy (%s) stands at positions %d and %d; use it once, or create a second one",
						k, a.Name, j+1, len(stack)+1)
					return
				}
				seen[obj] = len(stack) // positions count stages, not options
				stack = append(stack, k)
			default:
				return // not known statically
			}
		}
		if err := policy.CheckKinds(stack...); err != nil {
			pass.Reportf(call.Pos(), "%v", err)
		}
	})
	return nil, nil
}
