// Package policyhttp runs HTTP requests through Backstop pipelines. It offers a client
// http.RoundTripper that makes each attempt one request. It offers server middleware
// that keeps one retry owner per call path across services.
//
// # Client
//
//	p, err := policy.Wrap(deadline, breaker, budget, retry)
//	if err != nil {
//		return err
//	}
//	client := &http.Client{Transport: policyhttp.NewTransport(nil, p, policyhttp.Options{})}
//
// Each request is cloned per attempt. Only idempotent requests (or those with an
// Idempotency-Key) are retried. Responses are judged by [DefaultClassifier]:
// 408/429/502/503/504 are retried, Retry-After is honoured, and 500 and other 4xx are
// not retried. An open breaker is an error matching breaker.ErrOpen, with no request
// sent.
//
// A failed attempt's response body is drained so its connection can be reused, but
// never for long. The drain stops at [DefaultMaxDrain] (2 KiB), at
// [DefaultDrainTimeout], and at the call's end. A body that does not end within them is
// closed with its connection, and the retry goes out. A 503 whose body trickles in
// cannot stall it.
//
// Upgrades work through a pipeline. A 101 Switching Protocols response is final: never
// retried, never drained. Its Body is the switched connection, an io.ReadWriteCloser,
// as with net/http's own transport. So WebSockets and h2c can be dialled through a
// client that retries. A request asking for an upgrade is never hedged.
//
// # No retry beneath the owner
//
// A call reaches the server at most as many times as its pipeline makes attempts.
// net/http's Transport would add sends of its own. When a connection reused from its
// pool fails before any response, it sends the request again on another connection. It
// does so for a GET, HEAD, OPTIONS or TRACE, or a request with an Idempotency-Key. The
// pipeline never sees those sends.
//
// The transport prevents them, for HTTP/1. The attempt fails with [ErrResendRefused],
// marked retryable, and the pipeline's retry decides. Sent again, it is an attempt:
// counted, budgeted, reported, and numbered in Backstop-Attempt.
//
// A request with a body is refused when net/http asks its GetBody to rewind it. A
// request without one is spoilt before net/http writes it again. It fails with nothing
// sent, and the connection net/http took for it is closed unused. The Idempotency-Key
// still goes out with every attempt, and a request that is not resent is sent as
// before. net/http does not say whether it wrote any of a request it resends. So a
// resend of one it wrote nothing of is refused too, unless it read none of its body.
//
// HTTP/2's own retries stay: they resend only streams the server refused or never
// processed. Over HTTP/2 without TLS (h2c), the transport cannot tell the protocol and
// treats the connection as HTTP/1. The transport watches the connections taken under an
// attempt's context. Say a RoundTripper beneath sends requests of its own under it, one
// on a reused connection and then the attempt's. The attempt is then refused as a
// resend.
//
// A Backstop server's refusal is a 429 or 503 with callpath.HeaderRefused. It is
// retried after its Retry-After, or after callpath.HeaderRetryAfterMillis, which is
// finer. It counts against neither a breaker nor a budget. The server below protects
// itself and its dependency, and its own breaker counts that dependency's failures
// (fault.Refused).
//
// A handler behind a shedder (shed.Middleware) may call through the transport. It then
// gives its shedder slot back for the round trip (callpath.PauseFor). A server's limit
// bounds its own work, not the time it waits on a dependency that sheds for itself. So
// one slow dependency does not make every server above it refuse. The pipeline's
// deadline, per-attempt timeout and breaker (with SlowCall) bound that wait.
//
// # Routing
//
// [NewRouterTransport] picks a pipeline per request. A [Routes] table maps
// http.ServeMux patterns (Go 1.22 syntax, "[METHOD ][HOST]/[PATH]") to pipelines. The
// most specific pattern wins, as in a ServeMux, with a default for the rest:
//
//	routes, err := policyhttp.NewRoutes(
//		policyhttp.Route{Pattern: "POST api.example.com/v1/charges", Pipeline: payments},
//		policyhttp.Route{Pattern: "GET /v1/", Pipeline: reads},
//		policyhttp.Route{Pipeline: general}, // the default
//	)
//	client := &http.Client{Transport: policyhttp.NewRouterTransport(nil, routes, policyhttp.Options{})}
//
// The matching is net/http's own: an internal ServeMux, used only to match. Any
// [Router] will do. The config module's loader is one whose table a reload replaces.
//
// # Server
//
//	err := http.ListenAndServe(addr, policyhttp.Middleware(mux))
//
// [Middleware] reads the attempt headers of Backstop, Envoy and gRPC. It marks the
// request's context as owned upstream, so the handler's own retrying pipelines make one
// attempt each. Three services that each retry 3 times send 3 requests to the database
// per user call, not 27.
package policyhttp
