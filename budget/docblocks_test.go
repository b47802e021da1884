package budget_test

import (
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, retry policy.Policy) (*policy.Pipeline, error) {
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	p, err := policy.Wrap(deadline, b, retry)
	return p, err
}
