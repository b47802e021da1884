package budget

import (
	"errors"
	"sync/atomic"

	"github.com/backstop-go/backstop/policy"
)

// ErrInvalidOptions is matched by the constructors' errors for bad settings.
var ErrInvalidOptions = errors.New("budget: invalid options")

// Budget is what every budget in this package provides. It is a policy.Policy
// that stands outside its retry (rule O4). It is a policy.RetryBudget the retry
// consults. It adds read-outs for operators.
type Budget interface {
	policy.Policy
	policy.RetryBudget
	// Level is what remains now. For a TokenBucket, that is tokens. For a Ratio or
	// a Rate, it is retries that may start now.
	Level() float64
	// Allowed and Refused count the retries the budget allowed and refused so far.
	Allowed() uint64
	Refused() uint64
}

// counts keeps the allowed and refused totals shared by every budget.
type counts struct {
	allowed, refused atomic.Uint64
}

// Allowed returns the number of retries allowed so far.
func (c *counts) Allowed() uint64 { return c.allowed.Load() }

// Refused returns the number of retries refused so far.
func (c *counts) Refused() uint64 { return c.refused.Load() }

func (c *counts) count(ok bool) bool {
	if ok {
		c.allowed.Add(1)
	} else {
		c.refused.Add(1)
	}
	return ok
}

// stage is the policy side every budget shares. A budget does no per-call work of
// its own. So Bind returns next itself, and the stage costs nothing.
type stage struct{}

// Placement is [Place].
func (stage) Placement() policy.Placement { return Place }

// Bind returns next: the retry inside talks to the budget through policy.Env.Budget.
func (stage) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Kind is a budget's Placement.Kind.
const Kind = "budget"

// Place is every budget's placement: outside the retry, which it needs, and
// prompt. A stage with it that implements policy.RetryBudget is the retry's
// budget.
var Place = policy.Placement{Kind: Kind, Retry: policy.OutsideRetry, Prompt: true}
