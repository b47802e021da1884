package policy

import (
	"fmt"
	"reflect"
)

// stack is a pipeline's stages with their placements, outermost first.
type stack struct {
	ps     []Policy
	places []Placement
}

// checkOrder applies the ordering rules O1–O7 to a stack given outermost first. It
// returns the index of the budget and the retry (−1 where absent) for binding.
//
// Rules run in a fixed order: O6 first, then O2, O1, O3, O4, O5 and O7. A stack
// breaking several is thus reported under the one that explains it best.
func checkOrder(ps []Policy) (places []Placement, budget, retry int, err error) {
	s := stack{ps: ps, places: make([]Placement, len(ps))}
	for i, p := range ps {
		if isNil(p) {
			if p == nil {
				return nil, -1, -1, orderErr("O6", i+1, 0, "policy at position %d is nil", i+1)
			}
			return nil, -1, -1, orderErr("O6", i+1, 0,
				"policy at position %d is a nil %T; its constructor probably failed: check the error it returned", i+1, p)
		}
		s.places[i] = p.Placement()
		if s.places[i].Kind == "" {
			return nil, -1, -1, orderErr("O6", i+1, 0,
				"policy at position %d (%T) has no Placement.Kind; a stage must name its kind", i+1, p)
		}
		for j := 0; j < i; j++ {
			if samePolicy(ps[j], p) {
				return nil, -1, -1, orderErr("O6", j+1, i+1,
					"the same %s policy stands at positions %d and %d; use it once, or create a second one",
					s.places[i].Kind, j+1, i+1)
			}
		}
	}
	budget, retry, err = s.check()
	return s.places, budget, retry, err
}

// check runs the rules on placements alone; ps may hold placeholders.
func (s stack) check() (budget, retry int, err error) {
	if err := s.once(); err != nil {
		return -1, -1, err
	}
	retries := s.where(func(p Placement) bool { return p.OwnsRetries })
	if len(retries) > 1 {
		a, b := retries[0], retries[1]
		return -1, -1, orderErr("O2", a+1, b+1,
			"retries at positions %d and %d; keep one retry per pipeline, since nested retries multiply%s",
			a+1, b+1, product(s.ps[a], s.ps[b]))
	}
	retry = -1
	if len(retries) == 1 {
		retry = retries[0]
	}
	if err := s.deadlines(retry); err != nil {
		return -1, -1, err
	}
	if err := s.insideRetry(retry); err != nil {
		return -1, -1, err
	}
	if budget, err = s.outsideRetry(retry); err != nil {
		return -1, -1, err
	}
	if err := s.outermost(retry); err != nil {
		return -1, -1, err
	}
	if err := s.encloses(); err != nil {
		return -1, -1, err
	}
	return budget, retry, nil
}

// where returns the indexes of the stages whose placement has the trait.
func (s stack) where(trait func(Placement) bool) []int {
	var at []int
	for i, p := range s.places {
		if trait(p) {
			at = append(at, i)
		}
	}
	return at
}

// once applies O6 to stages that stand at most once in a pipeline. Kinds with a
// rule of their own (two retries, two deadlines…) are left to that rule.
func (s stack) once() error {
	for i, p := range s.places {
		if !p.Once || p.OwnsRetries || p.Deadline || p.Outermost || p.Encloses || isBudget(s.ps[i], p) {
			continue
		}
		for j := 0; j < i; j++ {
			if s.places[j].Kind == p.Kind {
				return orderErr("O6", j+1, i+1,
					"two %s stages at positions %d and %d; a pipeline holds one", p.Kind, j+1, i+1)
			}
		}
	}
	return nil
}

// deadlines applies O1: one overall deadline, outside the retry.
func (s stack) deadlines(retry int) error {
	at := s.where(func(p Placement) bool { return p.Deadline })
	if len(at) > 1 {
		return orderErr("O1", at[0]+1, at[1]+1,
			"deadlines at positions %d and %d; keep one overall deadline (use deadline.NewPerAttempt inside the retry for a per-try limit)",
			at[0]+1, at[1]+1)
	}
	if len(at) == 1 && retry >= 0 && at[0] > retry {
		return orderErr("O1", at[0]+1, retry+1,
			"deadline at position %d is inside retry at position %d; move the deadline outward or use deadline.NewPerAttempt",
			at[0]+1, retry+1)
	}
	return nil
}

// insideRetry applies O3: an InsideRetry stage needs a retry, and stands inside it.
func (s stack) insideRetry(retry int) error {
	for _, i := range s.where(func(p Placement) bool { return p.Retry == InsideRetry }) {
		k := s.places[i].Kind
		if retry < 0 {
			return orderErr("O3", i+1, 0,
				"%s at position %d has no retry to stand inside; use deadline.New for a single attempt", k, i+1)
		}
		if i < retry {
			return orderErr("O3", i+1, retry+1,
				"%s at position %d is outside retry at position %d; move it inside the retry, or use deadline.New for an overall deadline",
				k, i+1, retry+1)
		}
	}
	return nil
}

// outsideRetry applies O4: an OutsideRetry stage stands outside the retry, and a
// budget needs one. It returns the budget's index, −1 if none.
func (s stack) outsideRetry(retry int) (budget int, err error) {
	budget = -1
	for _, i := range s.where(func(p Placement) bool { return p.Retry == OutsideRetry && !p.Deadline }) {
		k := s.places[i].Kind
		if retry >= 0 && i > retry {
			return -1, orderErr("O4", i+1, retry+1,
				"%s at position %d is inside retry at position %d; move the %s outward, before the retry",
				k, i+1, retry+1, k)
		}
		if !isBudget(s.ps[i], s.places[i]) {
			continue
		}
		if budget >= 0 {
			return -1, orderErr("O4", budget+1, i+1,
				"budgets at positions %d and %d; keep one budget per retry", budget+1, i+1)
		}
		if retry < 0 {
			return -1, orderErr("O4", i+1, 0,
				"%s at position %d has no retry inside it; add a retry after it or remove the %s", k, i+1, k)
		}
		budget = i
	}
	return budget, nil
}

// isBudget reports whether a stage is a retry's budget: an OutsideRetry stage that
// implements RetryBudget.
func isBudget(p Policy, pl Placement) bool {
	_, ok := p.(RetryBudget)
	return ok && pl.Retry == OutsideRetry && !pl.Deadline
}

// outermost applies O5. There is one outermost stage, before every stage but free
// ones, in a pipeline with no retry.
func (s stack) outermost(retry int) error {
	at := s.where(func(p Placement) bool { return p.Outermost })
	if len(at) > 1 {
		return orderErr("O5", at[0]+1, at[1]+1,
			"%ss at positions %d and %d; keep one %s, outermost", s.places[at[0]].Kind, at[0]+1, at[1]+1, s.places[at[0]].Kind)
	}
	if len(at) == 0 {
		return nil
	}
	o, k := at[0], s.places[at[0]].Kind
	for i := 0; i < o; i++ {
		if !s.places[i].Free {
			return orderErr("O5", o+1, i+1,
				"%s at position %d is not outermost (position %d holds %s); move the %s outward, before every other stage",
				k, o+1, i+1, s.places[i].Kind, k)
		}
	}
	if retry >= 0 {
		return orderErr("O5", o+1, retry+1,
			"%s at position %d shares a pipeline with retry at position %d; retries belong on the client call path, in a pipeline of their own",
			k, o+1, retry+1)
	}
	return nil
}

// encloses applies O7: at most one enclosing stage. It stands outside every stage
// whose failures it answers: all but outermost and free ones.
func (s stack) encloses() error {
	first := -1
	for i, p := range s.places {
		if !p.Encloses {
			continue
		}
		if first >= 0 {
			return orderErr("O7", first+1, i+1,
				"%ss at positions %d and %d; keep one %s, outermost: the inner one would answer every failure the outer one sees",
				p.Kind, first+1, i+1, p.Kind)
		}
		first = i
		for j := 0; j < i; j++ {
			if q := s.places[j]; !q.Free && !q.Outermost {
				return orderErr("O7", i+1, j+1,
					"%s at position %d is inside %s at position %d; move the %s outward, before every stage whose failures it answers",
					p.Kind, i+1, q.Kind, j+1, p.Kind)
			}
		}
	}
	return nil
}

// product describes how the attempts of two nested retries multiply. It uses their
// MaxAttempts where both say it: ": 3 × 4 = 12 attempts per call".
func product(a, b Policy) string {
	type maxer interface{ MaxAttempts() int }
	ma, okA := a.(maxer)
	mb, okB := b.(maxer)
	if !okA || !okB {
		return ""
	}
	x, y := ma.MaxAttempts(), mb.MaxAttempts()
	return fmt.Sprintf(": %d × %d = %d attempts per call", x, y, x*y)
}

// isNil reports whether p is nil, or an interface holding a nil pointer, map,
// slice, channel or func. Such a policy's constructor failed.
func isNil(p Policy) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// samePolicy reports whether a and b are one policy object: the same pointer, map or
// channel. Values of other kinds are copies with no identity, and are never compared.
func samePolicy(a, b Policy) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	switch va.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return va.UnsafePointer() == vb.UnsafePointer()
	}
	return false
}

// placeholder stands for a stage known only by its placement, in [CheckPlacements].
type placeholder struct{ p Placement }

func (p *placeholder) Placement() Placement           { return p.p }
func (p *placeholder) Bind(next Runner, _ Env) Runner { return next }

// budgetPlaceholder is a placeholder that is a RetryBudget.
type budgetPlaceholder struct{ placeholder }

func (*budgetPlaceholder) Deposit()       {}
func (*budgetPlaceholder) Withdraw() bool { return true }
func (*budgetPlaceholder) OnSuccess()     {}
func (*budgetPlaceholder) OnFailure()     {}

// CheckPlacements applies the ordering rules of [Wrap] to a stack known only by its
// placements, outermost first. It returns the [*OrderError] Wrap would return, or
// nil. Tools that see a stack before it is built use it: a vet check, a config
// linter. So the rules live in one place. An OutsideRetry placement stands for a
// budget. It cannot see O6's "same object twice".
func CheckPlacements(places ...Placement) error {
	ps := make([]Policy, len(places))
	for i, p := range places {
		if p.Retry == OutsideRetry && !p.Deadline {
			ps[i] = &budgetPlaceholder{placeholder{p}}
		} else {
			ps[i] = &placeholder{p}
		}
	}
	_, _, _, err := checkOrder(ps)
	return err
}
