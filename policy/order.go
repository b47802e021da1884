package policy

import "reflect"

// checkOrder applies the ordering rules O1–O6 to a stack given outermost first. It
// returns the index of the budget and the retry (−1 where absent) for binding.
func checkOrder(ps []Policy) (budget, retry int, err error) {
	// O6 first: every other rule needs a non-nil Kind.
	for i, p := range ps {
		if p == nil {
			return -1, -1, orderErr("O6", i+1, 0, "policy at position %d is nil", i+1)
		}
		if !reflect.TypeOf(p).Comparable() {
			continue // cannot be the same object twice in any way we can detect
		}
		for j := 0; j < i; j++ {
			if ps[j] != nil && reflect.TypeOf(ps[j]) == reflect.TypeOf(p) && ps[j] == p {
				return -1, -1, orderErr("O6", j+1, i+1,
					"the same %s policy stands at positions %d and %d; use it once, or create a second one",
					p.Kind(), j+1, i+1)
			}
		}
	}

	deadline, retry, budget, shed := -1, -1, -1, -1
	for i, p := range ps {
		switch p.Kind() {
		case KindDeadline:
			if deadline >= 0 {
				return -1, -1, orderErr("O1", deadline+1, i+1,
					"deadlines at positions %d and %d; keep one overall deadline (use deadline.PerAttempt inside the retry for a per-try limit)",
					deadline+1, i+1)
			}
			deadline = i
		case KindRetry:
			if retry >= 0 {
				return -1, -1, orderErr("O2", retry+1, i+1,
					"retries at positions %d and %d; keep one retry per pipeline, since retries multiply (4 × 4 = 16 attempts)",
					retry+1, i+1)
			}
			retry = i
		case KindBudget:
			if budget >= 0 {
				return -1, -1, orderErr("O4", budget+1, i+1,
					"budgets at positions %d and %d; keep one budget per retry",
					budget+1, i+1)
			}
			budget = i
		case KindShed:
			if shed >= 0 {
				return -1, -1, orderErr("O5", shed+1, i+1,
					"shedders at positions %d and %d; keep one shedder, outermost", shed+1, i+1)
			}
			shed = i
		}
	}

	if deadline >= 0 && retry >= 0 && deadline > retry {
		return -1, -1, orderErr("O1", deadline+1, retry+1,
			"deadline at position %d is inside retry at position %d; move the deadline outward or use deadline.PerAttempt",
			deadline+1, retry+1)
	}
	for i, p := range ps {
		if p.Kind() != KindAttemptTimeout {
			continue
		}
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
	if budget >= 0 {
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
	if shed >= 0 {
		if shed != 0 {
			return -1, -1, orderErr("O5", shed+1, 1,
				"shed at position %d is not outermost (position 1 holds %s); move the shedder to position 1",
				shed+1, ps[0].Kind())
		}
		if retry >= 0 {
			return -1, -1, orderErr("O5", shed+1, retry+1,
				"shed at position %d shares a pipeline with retry at position %d; retries belong on the client call path, in a pipeline of their own",
				shed+1, retry+1)
		}
	}
	return budget, retry, nil
}
