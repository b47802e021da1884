package policygrpc_test

import (
	"google.golang.org/grpc"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, breaker, budget, retry, perAttempt policy.Policy, target string) (*grpc.ClientConn, error) {
	p, err := policy.Wrap(deadline, breaker, budget, retry, perAttempt)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, policygrpc.DialOptions(p, policygrpc.Options{})...)
	return conn, err
}
