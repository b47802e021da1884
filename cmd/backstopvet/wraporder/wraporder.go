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
	Name:      "wraporder",
	Doc:       "reports policy.Wrap calls whose stack breaks Backstop's ordering rules O1–O7",
	Requires:  []*analysis.Analyzer{inspect.Analyzer},
	Run:       run,
	FactTypes: []analysis.Fact{new(placed)},
}

func run(pass *analysis.Pass) (any, error) {
	l := newLearner(pass)
	l.export()

	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	var from map[types.Object]ast.Expr // variables and what they were assigned, read once
	ignored := ignore.Lines(pass, "wraporder")
	ins.Preorder([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node) {
		call := n.(*ast.CallExpr)
		wrap := callee(pass.TypesInfo, call)
		if wrap == nil || wrap.Pkg().Path() != policyPath || wrap.Name() != "Wrap" {
			return
		}
		if ignored(call.Pos()) || call.Ellipsis.IsValid() { // Wrap(stack...): not known statically
			return
		}
		if from == nil {
			from = map[types.Object]ast.Expr{}
			for _, f := range pass.Files {
				for obj, e := range assignments(pass.TypesInfo, f) {
					from[obj] = e
				}
			}
		}
		c := &site{l: l, from: from, scope: wrap.Pkg().Scope()}
		c.check(call)
	})
	return nil, nil
}

// site checks one call of Wrap.
type site struct {
	l     *learner
	from  map[types.Object]ast.Expr
	scope *types.Scope // package policy's
}

// check reports the call if its stages, all known, break a rule. It says nothing
// about a stack holding a stage whose placement it cannot tell.
func (c *site) check(call *ast.CallExpr) {
	pass := c.l.pass
	option := c.iface("Option")
	budget := c.iface("RetryBudget")
	if option == nil || budget == nil {
		return
	}
	var places []policy.Placement
	seen := map[types.Object]int{}
	for _, arg := range call.Args {
		if t := pass.TypesInfo.TypeOf(arg); t != nil && types.Implements(t, option) {
			continue // an Option among the stages: Wrap takes it out
		}
		p, t, ok := c.stage(arg, 0)
		if !ok {
			return
		}
		// CheckPlacements takes an OutsideRetry stage for a budget, which needs a
		// retry; a stage that is not one would be refused wrongly.
		if p.Retry == policy.OutsideRetry && !p.Deadline && !types.Implements(t, budget) {
			return
		}
		if id, ok := ast.Unparen(arg).(*ast.Ident); ok && identity(t) {
			obj := pass.TypesInfo.Uses[id]
			if j, dup := seen[obj]; dup {
				pass.Reportf(call.Pos(), "policy: O6: the same %s policy (%s) stands at positions %d and %d; use it once, or create a second one",
					p.Kind, id.Name, j+1, len(places)+1)
				return
			}
			seen[obj] = len(places) // positions count stages, not options
		}
		places = append(places, p)
	}
	if err := policy.CheckPlacements(places...); err != nil {
		pass.Reportf(call.Pos(), "%v", err)
	}
}

// iface returns the interface policy.<name>, or nil.
func (c *site) iface(name string) *types.Interface {
	obj, ok := c.scope.Lookup(name).(*types.TypeName)
	if !ok {
		return nil
	}
	i, _ := obj.Type().Underlying().(*types.Interface)
	return i
}

// stage returns the placement and the concrete type of the stage e evaluates to:
// from the fact on its type's Placement method, or, when that method has two, from
// the constructor that made it. Through an interface it follows a variable assigned
// once, and conversions. It sees through policy.Must to the value it returns.
func (c *site) stage(e ast.Expr, depth int) (policy.Placement, types.Type, bool) {
	info := c.l.pass.TypesInfo
	e = ast.Unparen(e)
	if depth > 8 {
		return policy.Placement{}, nil, false
	}
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 && info.Types[call.Fun].IsType() {
		return c.stage(call.Args[0], depth+1) // policy.Policy(b)
	}
	if v, ok := must(info, e); ok {
		return c.stage(v, depth+1) // policy.Must(deadline.NewPerAttempt(o)): the constructor inside tells
	}
	t := info.TypeOf(e)
	if tup, ok := t.(*types.Tuple); ok && tup.Len() > 0 {
		t = tup.At(0).Type() // x, err := deadline.New(deadline.Options{Timeout: …}) assigned x this call
	}
	if t == nil {
		return policy.Placement{}, nil, false
	}
	origin := func() (ast.Expr, bool) {
		id, ok := e.(*ast.Ident)
		if !ok {
			return nil, false
		}
		o := c.from[info.Uses[id]]
		return o, o != nil
	}
	if types.IsInterface(t) {
		if o, ok := origin(); ok {
			return c.stage(o, depth+1)
		}
		return policy.Placement{}, nil, false
	}
	_, m := placementOf(t)
	if m == nil {
		return policy.Placement{}, nil, false
	}
	f := c.l.fact(m)
	if p, ok := f.known(); ok {
		return p, t, true
	}
	if f == nil || len(f.Places) != 2 {
		return policy.Placement{}, nil, false
	}
	// Two placements: the constructor tells which.
	if call, ok := e.(*ast.CallExpr); ok {
		if fn := callee(info, call); fn != nil {
			if p, ok := c.l.fact(fn.Origin()).known(); ok {
				return p, t, true
			}
		}
		return policy.Placement{}, nil, false
	}
	if o, ok := origin(); ok {
		return c.stage(o, depth+1)
	}
	return policy.Placement{}, nil, false
}

// identity reports whether two values of type t are one policy object when equal, as
// Wrap compares them: pointers, maps and channels.
func identity(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Pointer, *types.Map, *types.Chan:
		return true
	}
	return false
}
