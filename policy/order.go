package policy

import (
	"fmt"
	"reflect"
)

// checkOrder applies the ordering rules O1–O7 to a stack given outermost first. It
// returns the index of the budget and the retry (−1 where absent) for binding.
//
// Rules are checked in a fixed order so that a stack breaking several is reported
// under the one that explains it best: O6 (nothing else can be read from a nil or
// repeated policy), then O2 (two retries are the fault even when a budget stands by
// each), then O1, O3, O4, O5 and O7.
func checkOrder(ps []Policy) (budget, retry int, err error) {
	for i, p := range ps {
		if isNil(p) {
			if p == nil {
				return -1, -1, orderErr("O6", i+1, 0, "policy at position %d is nil", i+1)
			}
			return -1, -1, orderErr("O6", i+1, 0,
				"policy at position %d is a nil %T; its constructor probably failed: check the error it returned", i+1, p)
		}
		for j := 0; j < i; j++ {
			if samePolicy(ps[j], p) {
				return -1, -1, orderErr("O6", j+1, i+1,
					"the same %s policy stands at positions %d and %d; use it once, or create a second one",
					p.Kind(), j+1, i+1)
			}
		}
	}

	var at [KindShed + 1][]int // positions (0-based) of each kind
	for i, p := range ps {
		if k := p.Kind(); k <= KindShed {
			at[k] = append(at[k], i)
		}
	}
	deadlines, retries, budgets, sheds := at[KindDeadline], at[KindRetry], at[KindBudget], at[KindShed]

	if len(retries) > 1 {
		a, b := retries[0], retries[1]
		return -1, -1, orderErr("O2", a+1, b+1,
			"retries at positions %d and %d; keep one retry per pipeline, since nested retries multiply%s",
			a+1, b+1, product(ps[a], ps[b]))
	}
	retry = -1
	if len(retries) == 1 {
		retry = retries[0]
	}

	if len(deadlines) > 1 {
		a, b := deadlines[0], deadlines[1]
		return -1, -1, orderErr("O1", a+1, b+1,
			"deadlines at positions %d and %d; keep one overall deadline (use deadline.PerAttempt inside the retry for a per-try limit)",
			a+1, b+1)
	}
	if len(deadlines) == 1 && retry >= 0 && deadlines[0] > retry {
		return -1, -1, orderErr("O1", deadlines[0]+1, retry+1,
			"deadline at position %d is inside retry at position %d; move the deadline outward or use deadline.PerAttempt",
			deadlines[0]+1, retry+1)
	}

	for _, i := range at[KindAttemptTimeout] {
		if retry < 0 {
			return -1, -1, orderErr("O3", i+1, 0,
				"attempt-timeout at position %d has no retry to stand inside; use deadline.New for a single attempt",
				i+1)
		}
		if i < retry {
			return -1, -1, orderErr("O3", i+1, retry+1,
				"attempt-timeout at position %d is outside retry at position %d; move it inside the retry, or use deadline.New for an overall deadline",
				i+1, retry+1)
		}
	}

	budget = -1
	if len(budgets) > 1 {
		a, b := budgets[0], budgets[1]
		return -1, -1, orderErr("O4", a+1, b+1,
			"budgets at positions %d and %d; keep one budget per retry", a+1, b+1)
	}
	if len(budgets) == 1 {
		budget = budgets[0]
		if retry < 0 {
			return -1, -1, orderErr("O4", budget+1, 0,
				"budget at position %d has no retry inside it; add a retry after it or remove the budget",
				budget+1)
		}
		if budget > retry {
			return -1, -1, orderErr("O4", budget+1, retry+1,
				"budget at position %d is inside retry at position %d; move the budget outward, before the retry",
				budget+1, retry+1)
		}
		if _, ok := ps[budget].(RetryBudget); !ok {
			return -1, -1, orderErr("O4", budget+1, 0,
				"budget at position %d (%T) does not implement policy.RetryBudget", budget+1, ps[budget])
		}
	}

	if len(sheds) > 1 {
		a, b := sheds[0], sheds[1]
		return -1, -1, orderErr("O5", a+1, b+1,
			"shedders at positions %d and %d; keep one shedder, outermost", a+1, b+1)
	}
	if len(sheds) == 1 {
		s := sheds[0]
		// Policies of KindOther stand anywhere, outside the shedder too.
		for i := 0; i < s; i++ {
			if k := ps[i].Kind(); k != KindOther {
				return -1, -1, orderErr("O5", s+1, i+1,
					"shed at position %d is not outermost (position %d holds %s); move the shedder outward, before every other stage",
					s+1, i+1, k)
			}
		}
		if retry >= 0 {
			return -1, -1, orderErr("O5", s+1, retry+1,
				"shed at position %d shares a pipeline with retry at position %d; retries belong on the client call path, in a pipeline of their own",
				s+1, retry+1)
		}
	}
	if err := checkFallback(ps); err != nil {
		return -1, -1, err
	}
	return budget, retry, nil
}

// checkFallback applies O7: at most one fallback, and it stands outside every stage
// whose failures it answers — every stage but a shedder and KindOther policies, which
// may stand outside it.
func checkFallback(ps []Policy) error {
	first := -1
	for i, p := range ps {
		if p.Kind() != KindFallback {
			continue
		}
		if first >= 0 {
			return orderErr("O7", first+1, i+1,
				"fallbacks at positions %d and %d; keep one fallback, outermost: the inner one would answer every failure the outer one sees",
				first+1, i+1)
		}
		first = i
		for j := 0; j < i; j++ {
			if k := ps[j].Kind(); k != KindOther && k != KindShed {
				return orderErr("O7", i+1, j+1,
					"fallback at position %d is inside %s at position %d; move the fallback outward, before every stage whose failures it answers",
					i+1, k, j+1)
			}
		}
	}
	return nil
}

// product describes how the attempts of two nested retries multiply, from their
// MaxAttempts where both say it, e.g. ": 3 × 4 = 12 attempts per call".
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

// isNil reports whether p is nil or an interface holding a nil pointer, map, slice,
// channel or func: a policy whose constructor failed.
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
// channel. Values of other kinds (a struct passed by value) are copies with no identity
// to share, and are never compared, so no value can make the comparison panic.
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

// placeholder stands for a policy of a given kind in [CheckKinds].
type placeholder struct{ k Kind }

func (p *placeholder) Kind() Kind                     { return p.k }
func (p *placeholder) Bind(next Runner, _ Env) Runner { return next }

// budgetPlaceholder is a placeholder of KindBudget: budgets implement RetryBudget.
type budgetPlaceholder struct{ placeholder }

func (*budgetPlaceholder) Deposit()       {}
func (*budgetPlaceholder) Withdraw() bool { return true }
func (*budgetPlaceholder) OnSuccess()     {}
func (*budgetPlaceholder) OnFailure()     {}

// CheckKinds applies the ordering rules of [Wrap] to a stack known only by its kinds,
// outermost first, and returns the [*OrderError] Wrap would return for policies of
// those kinds (nil if the order is right). Tools that see a stack before it is built —
// a vet check, a config linter — use it, so the rules live in one place. It cannot
// see O6's "same object twice"; a tool that can must say so itself.
func CheckKinds(kinds ...Kind) error {
	ps := make([]Policy, len(kinds))
	for i, k := range kinds {
		if k == KindBudget {
			ps[i] = &budgetPlaceholder{placeholder{k}}
		} else {
			ps[i] = &placeholder{k}
		}
	}
	if _, _, err := checkOrder(ps); err != nil {
		return err
	}
	return nil
}
