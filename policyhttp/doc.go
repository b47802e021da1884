// Package policyhttp runs HTTP requests through Backstop pipelines: a client
// http.RoundTripper that makes each attempt one request, and server middleware that
// keeps one retry owner per call path across services.
//
// # Client
//
//	p, err := policy.Wrap(deadline, breaker, budget, retry)
//	if err != nil {
//		return err
//	}
//	client := &http.Client{Transport: policyhttp.NewTransport(nil, p)}
//
// Each request is cloned per attempt; only idempotent requests (or those with an
// Idempotency-Key) are retried; responses are judged by [DefaultClassifier]
// (408/429/502/503/504 retried, Retry-After honoured, 500 and other 4xx not); an open
// breaker is an error matching breaker.ErrOpen with no request sent.
//
// # Server
//
//	http.ListenAndServe(addr, policyhttp.Middleware(mux))
//
// [Middleware] reads the attempt headers of Backstop, Envoy and gRPC and marks the
// request's context as owned upstream: the handler's own retrying pipelines then make
// one attempt each. Three services that each retry 3 times send 3 requests to the
// database per user call, not 27.
package policyhttp
