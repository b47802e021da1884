package chaos_test

import (
	"errors"

	"github.com/backstop-go/backstop/chaos"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, breaker, budget, retry policy.Policy) *policy.Pipeline {
	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.3, Err: fault.Retryable(errors.New("injected"))}))
	p := policy.Must(policy.Wrap(deadline, breaker, budget, retry, inj)) // 30 % of attempts fail
	return p
}
