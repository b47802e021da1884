package policyhttp_test

import (
	"net/http"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policyhttp"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(deadline, breaker, budget, retry policy.Policy) error {
	p, err := policy.Wrap(deadline, breaker, budget, retry)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: policyhttp.NewTransport(nil, p, policyhttp.Options{})}
	_ = client
	return nil
}

var _ = func(addr string, mux *http.ServeMux) error {
	err := http.ListenAndServe(addr, policyhttp.Middleware(mux))
	return err
}

var _ = func(payments, reads, general *policy.Pipeline) error {
	routes, err := policyhttp.NewRoutes(
		policyhttp.Route{Pattern: "POST api.example.com/v1/charges", Pipeline: payments},
		policyhttp.Route{Pattern: "GET /v1/", Pipeline: reads},
		policyhttp.Route{Pipeline: general}, // the default
	)
	client := &http.Client{Transport: policyhttp.NewRouterTransport(nil, routes, policyhttp.Options{})}
	_ = client
	return err
}
