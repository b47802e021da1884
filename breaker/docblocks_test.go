package breaker_test

import (
	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/policy"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, retry policy.Policy) error {
	b, err := breaker.New(breaker.Options{Name: "db"}) // trips after 5 failures in a row
	if err != nil {
		return err
	}
	calls, err := policy.Wrap(deadline, b, retry) // outside the retry: counts calls
	if err != nil {
		return err
	}
	attempts, err := policy.Wrap(deadline, retry, b) // inside: counts attempts
	_, _ = calls, attempts
	return err
}
