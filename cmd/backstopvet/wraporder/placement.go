package wraporder

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"reflect"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/backstop-go/backstop/policy"
)

// placed is the fact wraporder records on what declares a stage's placement: a
// Placement method, a package-level Placement variable, or a constructor.
//
// A Placement method that picks one of two literals by a bool field of its receiver
// has two Places. A constructor of such a type that sets the field to a constant has
// one: the placement its stages get.
type placed struct {
	// Places holds one placement, or two for a method that picks by Field:
	// Places[0] when the field is true, Places[1] when it is false.
	Places []policy.Placement
	// Field names the receiver's bool field that picks, for a method with two.
	Field string
}

func (*placed) AFact() {}

func (f *placed) String() string {
	if len(f.Places) == 2 {
		return fmt.Sprintf("%s ? %s : %s", f.Field, show(f.Places[0]), show(f.Places[1]))
	}
	return show(f.Places[0])
}

// known returns the one placement f holds, if it holds one.
func (f *placed) known() (policy.Placement, bool) {
	if f == nil || len(f.Places) != 1 {
		return policy.Placement{}, false
	}
	return f.Places[0], true
}

// show writes p as a Go literal of its non-zero fields.
func show(p policy.Placement) string {
	var b strings.Builder
	b.WriteString("Placement{")
	v := reflect.ValueOf(p)
	sep := ""
	for i := range v.NumField() {
		f := v.Field(i)
		if f.IsZero() {
			continue
		}
		format := "%s%s: %v"
		if f.Kind() == reflect.String {
			format = "%s%s: %q"
		}
		fmt.Fprintf(&b, format, sep, v.Type().Field(i).Name, f.Interface())
		sep = ", "
	}
	b.WriteString("}")
	return b.String()
}

const policyPath = "github.com/backstop-go/backstop/policy"

// isPolicyType reports whether t is the named type policy.<name>.
func isPolicyType(t types.Type, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == policyPath && n.Obj().Name() == name
}

// learner reads the placements a package declares. It reads this package's code,
// and the facts of the packages it imports.
type learner struct {
	pass     *analysis.Pass
	decls    map[*types.Func]*ast.FuncDecl
	inits    map[*types.Var]ast.Expr // package-level variables' initializers
	assigned map[*types.Var]bool     // package-level variables changed after their initialization
	memo     map[types.Object]*placed
	busy     map[types.Object]bool
}

func newLearner(pass *analysis.Pass) *learner {
	l := &learner{pass: pass, decls: map[*types.Func]*ast.FuncDecl{}, inits: map[*types.Var]ast.Expr{},
		assigned: map[*types.Var]bool{}, memo: map[types.Object]*placed{}, busy: map[types.Object]bool{}}
	info := pass.TypesInfo
	for _, file := range pass.Files {
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if f, ok := info.Defs[d.Name].(*types.Func); ok && d.Body != nil {
					l.decls[f] = d
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok && len(vs.Names) == len(vs.Values) {
						for i, id := range vs.Names {
							if v, ok := info.Defs[id].(*types.Var); ok {
								l.inits[v] = vs.Values[i]
							}
						}
					}
				}
			}
		}
		// A variable assigned, or whose address is taken, may change: its
		// initializer says nothing of its value.
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					l.change(lhs)
				}
			case *ast.IncDecStmt:
				l.change(n.X)
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					l.change(n.X)
				}
			}
			return true
		})
	}
	return l
}

// change marks the package-level variable at the root of e as changed.
func (l *learner) change(e ast.Expr) {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.SelectorExpr:
			if v, ok := l.pass.TypesInfo.Uses[x.Sel].(*types.Var); ok && !v.IsField() {
				l.assigned[v] = true
				return
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.Ident:
			if v, ok := l.pass.TypesInfo.Uses[x].(*types.Var); ok {
				l.assigned[v] = true
			}
			return
		default:
			return
		}
	}
}

// fact returns what obj declares about placement, or nil if nothing is known: for an
// object of another package its fact, for one of this package what its code says.
func (l *learner) fact(obj types.Object) *placed {
	if obj == nil || obj.Pkg() == nil {
		return nil
	}
	if f, ok := l.memo[obj]; ok {
		return f
	}
	if obj.Pkg() != l.pass.Pkg {
		f := new(placed)
		if !l.pass.ImportObjectFact(obj, f) {
			f = nil
		}
		l.memo[obj] = f
		return f
	}
	if l.busy[obj] {
		return nil
	}
	l.busy[obj] = true
	var f *placed
	switch obj := obj.(type) {
	case *types.Func:
		if d := l.decls[obj]; d != nil {
			if d.Recv != nil {
				f = l.method(obj, d)
			} else {
				f = l.constructor(obj, d)
			}
		}
	case *types.Var:
		if e, ok := l.inits[obj]; ok && !l.assigned[obj] && isPolicyType(obj.Type(), "Placement") {
			if p, ok := l.value(e); ok {
				f = &placed{Places: []policy.Placement{p}}
			}
		}
	}
	delete(l.busy, obj)
	l.memo[obj] = f
	return f
}

// method reads a method Placement() policy.Placement whose body returns a placement
// known statically, or picks one of two by a bool field of its receiver.
func (l *learner) method(m *types.Func, d *ast.FuncDecl) *placed {
	sig := m.Type().(*types.Signature)
	if m.Name() != "Placement" || sig.Params().Len() != 0 || sig.Results().Len() != 1 ||
		!isPolicyType(sig.Results().At(0).Type(), "Placement") {
		return nil
	}
	var recv types.Object
	if names := d.Recv.List[0].Names; len(names) == 1 {
		recv = l.pass.TypesInfo.Defs[names[0]]
	}
	body := d.Body.List
	returned := func(s ast.Stmt) (policy.Placement, bool) {
		if b, ok := s.(*ast.BlockStmt); ok && len(b.List) == 1 {
			s = b.List[0]
		}
		r, ok := s.(*ast.ReturnStmt)
		if !ok || len(r.Results) != 1 {
			return policy.Placement{}, false
		}
		return l.value(r.Results[0])
	}
	var cond ast.Expr
	var yes, no policy.Placement
	var okYes, okNo bool
	switch {
	case len(body) == 1:
		if p, ok := returned(body[0]); ok {
			return &placed{Places: []policy.Placement{p}}
		}
		ifs, ok := body[0].(*ast.IfStmt)
		if !ok || ifs.Init != nil || ifs.Else == nil {
			return nil
		}
		cond = ifs.Cond
		yes, okYes = returned(ifs.Body)
		no, okNo = returned(ifs.Else)
	case len(body) == 2:
		ifs, ok := body[0].(*ast.IfStmt)
		if !ok || ifs.Init != nil || ifs.Else != nil {
			return nil
		}
		cond = ifs.Cond
		yes, okYes = returned(ifs.Body)
		no, okNo = returned(body[1])
	}
	if !okYes || !okNo {
		return nil
	}
	if yes == no {
		return &placed{Places: []policy.Placement{yes}}
	}
	cond = ast.Unparen(cond)
	if u, ok := cond.(*ast.UnaryExpr); ok && u.Op == token.NOT {
		cond, yes, no = ast.Unparen(u.X), no, yes
	}
	// The placement depends on the receiver's state: only a field a constructor sets
	// can tell which, and only through the constructor.
	sel, ok := cond.(*ast.SelectorExpr)
	if !ok || recv == nil {
		return nil
	}
	if x, ok := sel.X.(*ast.Ident); !ok || l.pass.TypesInfo.Uses[x] != recv {
		return nil
	}
	s := l.pass.TypesInfo.Selections[sel]
	if s == nil || s.Kind() != types.FieldVal || len(s.Index()) != 1 || !types.Identical(s.Type(), types.Typ[types.Bool]) {
		return nil
	}
	return &placed{Places: []policy.Placement{yes, no}, Field: sel.Sel.Name}
}

// constructor reads a package-level function whose result is a stage of a type with
// two placements, and learns which one its stages get: every result it returns, but
// nil, is a composite literal of the type that sets the picking field to a constant
// (or leaves it false), or the result of a constructor already known, called alone
// or through policy.Must.
func (l *learner) constructor(fn *types.Func, d *ast.FuncDecl) *placed {
	sig := fn.Type().(*types.Signature)
	if sig.Results().Len() == 0 {
		return nil
	}
	recv, m := placementOf(sig.Results().At(0).Type())
	if m == nil {
		return nil
	}
	mf := l.fact(m)
	if mf == nil || len(mf.Places) != 2 {
		return nil
	}
	info := l.pass.TypesInfo
	locals := assignments(info, d.Body)
	var got *policy.Placement
	var pick func(e ast.Expr, depth int) (policy.Placement, bool)
	pick = func(e ast.Expr, depth int) (policy.Placement, bool) {
		e = ast.Unparen(e)
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
			e = ast.Unparen(u.X)
		}
		switch x := e.(type) {
		case *ast.CompositeLit:
			if named(info.TypeOf(x)) != recv {
				return policy.Placement{}, false
			}
			on := false
			for _, elt := range x.Elts {
				kv, ok := elt.(*ast.KeyValueExpr)
				if !ok {
					return policy.Placement{}, false // positional: rare, and not read
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == mf.Field {
					v := info.Types[kv.Value].Value
					if v == nil || v.Kind() != constant.Bool {
						return policy.Placement{}, false
					}
					on = constant.BoolVal(v)
				}
			}
			if on {
				return mf.Places[0], true
			}
			return mf.Places[1], true
		case *ast.CallExpr:
			if v, ok := must(info, x); ok && depth < 4 {
				return pick(v, depth+1)
			}
			if f := callee(info, x); f != nil {
				return l.fact(f.Origin()).known()
			}
		case *ast.Ident:
			if o, ok := locals[info.Uses[x]]; ok && o != nil && depth < 4 {
				return pick(o, depth+1)
			}
		}
		return policy.Placement{}, false
	}
	ok := true
	ast.Inspect(d.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			if len(n.Results) == 0 {
				ok = false // named results: not read
				return false
			}
			if info.Types[n.Results[0]].IsNil() {
				return false
			}
			p, known := pick(n.Results[0], 0)
			if !known || got != nil && *got != p {
				ok = false
			}
			got = &p
		}
		return true
	})
	if !ok || got == nil {
		return nil
	}
	return &placed{Places: []policy.Placement{*got}}
}

// value reads a placement known statically: a composite literal of policy.Placement
// with constant fields, or a package-level variable initialized by one.
func (l *learner) value(e ast.Expr) (policy.Placement, bool) {
	info := l.pass.TypesInfo
	var p policy.Placement
	switch x := ast.Unparen(e).(type) {
	case *ast.CompositeLit:
		t := info.TypeOf(x)
		if !isPolicyType(t, "Placement") {
			return p, false
		}
		st := t.Underlying().(*types.Struct)
		v := reflect.ValueOf(&p).Elem()
		for i, elt := range x.Elts {
			name, val := "", elt
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				k, ok := kv.Key.(*ast.Ident)
				if !ok {
					return p, false
				}
				name, val = k.Name, kv.Value
			} else if i < st.NumFields() {
				name = st.Field(i).Name()
			}
			if !set(v.FieldByName(name), info.Types[val].Value) {
				return p, false
			}
		}
		return p, true
	case *ast.Ident:
		return l.variable(info.Uses[x])
	case *ast.SelectorExpr:
		return l.variable(info.Uses[x.Sel])
	}
	return p, false
}

// variable returns the placement held by a package-level variable.
func (l *learner) variable(obj types.Object) (policy.Placement, bool) {
	v, ok := obj.(*types.Var)
	if !ok || v.IsField() || v.Pkg() == nil || v.Parent() != v.Pkg().Scope() {
		return policy.Placement{}, false
	}
	return l.fact(v).known()
}

// set stores the constant c in the placement's field f. It fails for a field this
// tool's policy package lacks, and for a value that is not constant or does not fit.
func set(f reflect.Value, c constant.Value) bool {
	if !f.IsValid() || c == nil {
		return false
	}
	switch f.Kind() {
	case reflect.String:
		if c.Kind() != constant.String {
			return false
		}
		f.SetString(constant.StringVal(c))
	case reflect.Bool:
		if c.Kind() != constant.Bool {
			return false
		}
		f.SetBool(constant.BoolVal(c))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		u, exact := constant.Uint64Val(constant.ToInt(c))
		if !exact || f.OverflowUint(u) {
			return false
		}
		f.SetUint(u)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		i, exact := constant.Int64Val(constant.ToInt(c))
		if !exact || f.OverflowInt(i) {
			return false
		}
		f.SetInt(i)
	default:
		return false
	}
	return true
}

// export records the facts of this package's declarations for the packages that
// import it: its Placement methods and variables, and the constructors that tell
// apart the two placements of a type.
func (l *learner) export() {
	for _, file := range l.pass.Files {
		for _, d := range file.Decls {
			var objs []types.Object
			switch d := d.(type) {
			case *ast.FuncDecl:
				objs = append(objs, l.pass.TypesInfo.Defs[d.Name])
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, id := range vs.Names {
							objs = append(objs, l.pass.TypesInfo.Defs[id])
						}
					}
				}
			}
			for _, obj := range objs {
				if _, ok := obj.(*types.Const); ok || obj == nil {
					continue
				}
				if f := l.fact(obj); f != nil {
					l.pass.ExportObjectFact(obj, f)
				}
			}
		}
	}
}

// placementOf returns the named type under t (through one pointer) and its
// Placement method, or nils.
func placementOf(t types.Type) (*types.TypeName, *types.Func) {
	obj, _, _ := types.LookupFieldOrMethod(t, false, nil, "Placement")
	m, ok := obj.(*types.Func)
	if !ok {
		return named(t), nil
	}
	return named(m.Type().(*types.Signature).Recv().Type()), m.Origin()
}

// named returns the generic origin's name of the named type under t, through one
// pointer, or nil.
func named(t types.Type) *types.TypeName {
	if t == nil {
		return nil
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Origin().Obj()
	}
	return nil
}

// callee returns the package-level function a call calls, or nil.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch x := fun.(type) { // a generic function instantiated by hand: fallback.New[T]
	case *ast.IndexExpr:
		fun = x.X
	case *ast.IndexListExpr:
		fun = x.X
	}
	var id *ast.Ident
	switch fn := ast.Unparen(fun).(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		id = fn.Sel
	default:
		return nil
	}
	f, ok := info.Uses[id].(*types.Func)
	if !ok || f.Pkg() == nil || f.Type().(*types.Signature).Recv() != nil {
		return nil
	}
	return f
}

// must returns the value argument of a call of policy.Must: the call v, err := f()
// of policy.Must(f()), or v of policy.Must(v, err).
func must(info *types.Info, e ast.Expr) (ast.Expr, bool) {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return nil, false
	}
	f := callee(info, call)
	if f == nil || f.Pkg().Path() != policyPath || f.Name() != "Must" {
		return nil, false
	}
	return call.Args[0], true
}

// assignments maps each variable assigned under root to the one expression it is
// assigned from (the call, for x, err := f()), or to nil if it is assigned more than
// once or from anything else.
func assignments(info *types.Info, root ast.Node) map[types.Object]ast.Expr {
	from := map[types.Object]ast.Expr{}
	note := func(lhs, rhs ast.Expr) {
		id, ok := lhs.(*ast.Ident)
		if !ok || id.Name == "_" {
			return
		}
		obj := info.ObjectOf(id)
		if obj == nil {
			return
		}
		if _, seen := from[obj]; seen {
			from[obj] = nil
			return
		}
		from[obj] = rhs
	}
	ast.Inspect(root, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			switch {
			case len(n.Lhs) == len(n.Rhs):
				for i := range n.Lhs {
					note(n.Lhs[i], n.Rhs[i])
				}
			case len(n.Rhs) == 1: // x, err := deadline.New(deadline.Options{Timeout: …})
				note(n.Lhs[0], n.Rhs[0])
				for _, lhs := range n.Lhs[1:] {
					note(lhs, nil)
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
				for _, id := range n.Names[1:] {
					note(id, nil)
				}
			}
		case *ast.RangeStmt:
			if n.Key != nil {
				note(n.Key, nil)
			}
			if n.Value != nil {
				note(n.Value, nil)
			}
		}
		return true
	})
	return from
}
