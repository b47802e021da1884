package budget

import (
	"fmt"
	"sync/atomic"

	"github.com/backstop-go/backstop/policy"
)

// InFlight caps the retries in flight under a budget: at most Max retries at once.
// A retry is in flight from the moment the budget allows it until its attempt ends,
// backoff included. The cap holds across every call that shares it, as Envoy's
// max_retries circuit breaker caps a cluster's concurrent retries. A burst of
// failures then costs a dependency at most Max extra requests at a time. That holds
// whatever the budget's ratio or tokens allow.
//
// It wraps another budget, which decides as before. A retry must pass both. It
// implements policy.RetryLease: a retry tells it when each retry ends. A retry
// loop that only knows policy.RetryBudget gets Withdraw. That checks the cap
// without holding a place. An InFlight is safe for concurrent use, lock-free and
// allocation-free. Build it with [NewInFlight].
type InFlight struct {
	b      Budget
	lease  policy.RetryLease // b, if it is one
	max    int64
	now    atomic.Int64
	capped atomic.Uint64
}

// InFlightOptions configure an [InFlight].
type InFlightOptions struct {
	// Budget is the budget wrapped. Required.
	Budget Budget
	// Max is the most retries in flight at once, ≥ 1. Required.
	Max int
}

// NewInFlight returns o.Budget with at most o.Max retries in flight. Or it returns
// an error matching ErrInvalidOptions.
func NewInFlight(o InFlightOptions) (*InFlight, error) {
	b, max := o.Budget, o.Max
	switch {
	case b == nil:
		return nil, fmt.Errorf("%w: InFlightOptions.Budget is nil", ErrInvalidOptions)
	case max < 1:
		return nil, fmt.Errorf("%w: InFlightOptions.Max is %d; want ≥ 1", ErrInvalidOptions, max)
	}
	f := &InFlight{b: b, max: int64(max)}
	f.lease, _ = b.(policy.RetryLease)
	return f, nil
}

// Placement is [Place].
func (f *InFlight) Placement() policy.Placement { return Place }

// Bind returns next: the retry inside talks to the budget through policy.Env.Budget.
func (f *InFlight) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Take holds a place for a retry if one is free and the wrapped budget allows it.
func (f *InFlight) Take(reason string) (int64, bool) {
	if f.now.Add(1) > f.max {
		f.now.Add(-1)
		f.capped.Add(1)
		return 0, false
	}
	if f.lease != nil {
		taken, ok := f.lease.Take(reason)
		if !ok {
			f.now.Add(-1)
		}
		return taken, ok
	}
	if !f.b.Withdraw() {
		f.now.Add(-1)
		return 0, false
	}
	return 0, true
}

// End frees the retry's place and tells the wrapped budget.
func (f *InFlight) End(taken int64, ok bool) {
	f.now.Add(-1)
	if f.lease != nil {
		f.lease.End(taken, ok)
	}
}

// Withdraw allows a retry if a place is free now and the wrapped budget allows it.
// It holds no place, there being no end to free it.
func (f *InFlight) Withdraw() bool {
	if f.now.Load() >= f.max {
		f.capped.Add(1)
		return false
	}
	return f.b.Withdraw()
}

// Deposit, OnSuccess and OnFailure go to the wrapped budget.
func (f *InFlight) Deposit()   { f.b.Deposit() }
func (f *InFlight) OnSuccess() { f.b.OnSuccess() }
func (f *InFlight) OnFailure() { f.b.OnFailure() }

// Level returns the wrapped budget's level, or 0 while every place is taken.
func (f *InFlight) Level() float64 {
	if f.now.Load() >= f.max {
		return 0
	}
	return f.b.Level()
}

// InFlight returns the retries in flight now.
func (f *InFlight) InFlight() int { return int(f.now.Load()) }

// Capped returns the retries refused because Max were in flight.
func (f *InFlight) Capped() uint64 { return f.capped.Load() }

// Allowed returns the retries allowed so far.
func (f *InFlight) Allowed() uint64 { return f.b.Allowed() }

// Refused returns the retries refused so far, by the cap or the wrapped budget.
func (f *InFlight) Refused() uint64 { return f.b.Refused() + f.capped.Load() }

// ExplainStage implements policy.StageExplainer.
func (f *InFlight) ExplainStage() policy.Stage {
	st := policy.Stage{Refusal: budgetRefusal}
	if e, ok := f.b.(policy.StageExplainer); ok {
		st = e.ExplainStage()
	}
	st.Summary += fmt.Sprintf("; at most %d retries in flight at once", f.max)
	return st
}

var (
	_ Budget            = (*InFlight)(nil)
	_ policy.RetryLease = (*InFlight)(nil)
)
