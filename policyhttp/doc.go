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
// # A mesh beneath
//
// An Envoy sidecar retries by its route's retry_policy. Beneath a Backstop retry
// owner that would multiply the attempts: 3 × 3 = 9. [Options].Mesh says who owns
// them (callpath.Mesh):
//
//	| Mesh                 | who retries | each attempt sends             | each response is read for      |
//	|----------------------|-------------|--------------------------------|--------------------------------|
//	| MeshBackstopOwns (0) | the pipeline| x-envoy-max-retries: 0 if owned| x-envoy-attempt-count > 1      |
//	| MeshEnvoyOwns        | the mesh    | Backstop-Attempt: 1            | x-envoy-attempt-count          |
//	| MeshNone             | the pipeline| no Envoy header                | nothing                        |
//
// The zero value sends x-envoy-max-retries: 0 on every attempt made under a retry
// owner, whatever stands beneath. It does not first detect an Envoy from response
// headers (x-envoy-upstream-service-time, server: envoy). Detection would come
// after the first responses, and the first calls of an outage are the ones it must
// not multiply. Envoy removes the header before it forwards the request. A server
// that is no Envoy ignores it. Sending it always is simpler, and right from the
// first call.
//
// With MeshEnvoyOwns, the transport marks the call as owned upstream
// (callpath.WithUpstreamAttempt), so the pipeline's retry makes one attempt. It
// reports retry_suppressed{why="owner"} when that attempt fails. A retry owner
// further up (this process, or a caller's) still owns the call path: beneath it
// the mesh is told 0. A per-attempt timeout then bounds all of the mesh's
// attempts together.
//
// In both modes, an x-envoy-attempt-count above 1 on a response is counted. Each
// retry the mesh made is charged to [Options].MeshBudget as the pipeline charges
// its own: OnFailure, then Withdraw (or a lease's Take and End, reason
// callpath.ReasonMesh). It is reported to [Options].MeshObserver as an
// event.AttemptEnd failed with callpath.ErrMeshRetried and an
// event.RetryScheduled of reason "mesh", both of Stage "mesh". So a
// metrics.Observer counts them in backstop_attempts_total and
// backstop_retries_total. Left nil, both are the pipeline's own
// (policy.Pipeline.Budget and Observer). Once the budget refuses a
// mesh's retry, calls the mesh owns send x-envoy-max-retries: 0. Each such call
// asks the budget for a retry first; when it allows one, the mesh may retry again
// and its first retry is paid. So the budget bounds the whole path.
//
// What Envoy honours, from its router filter and connection manager docs and
// source (envoyproxy/envoy: docs/root/configuration/http/http_filters/
// router_filter.rst, source/common/http/conn_manager_utility.cc,
// source/common/router/retry_state_impl.cc):
//   - x-envoy-max-retries "takes precedence over the number of retries set in
//     either retry policy". It counts only when a retry policy is in force (the
//     route's, the virtual host's, or x-envoy-retry-on / x-envoy-retry-grpc-on).
//     The router consumes it: the upstream never sees it.
//   - x-envoy-max-retries, x-envoy-retry-on, x-envoy-retry-grpc-on,
//     x-envoy-upstream-rq-timeout-ms and x-envoy-upstream-rq-per-try-timeout-ms
//     are honoured from internal requests only; the connection manager strips them
//     from external ones. A request is internal when, after XFF handling, its
//     x-forwarded-for holds one address and it is internal. With
//     use_remote_address false and no x-forwarded-for from the app, a request is
//     external "even if the real remote is internal". Since Envoy 1.29 an unset
//     internal_address_config logs that RFC 1918 addresses will stop being
//     trusted by default. A sidecar needs use_remote_address: true and an
//     internal_address_config that covers the app (127.0.0.1 for a loopback
//     listener), or the route's num_retries set to 0 instead.
//   - x-envoy-attempt-count reaches the response only with the virtual host's
//     include_attempt_count_in_response; the router sets it (overwriting an
//     upstream's) on upstream answers and on its own local replies (a 503 or a
//     504). As the router reads, suppress_envoy_headers does not remove it.
//     include_request_attempt_count sends it to the upstream; a Backstop server
//     reads it there as an attempt owned upstream ([Middleware]).
//   - respect_expected_rq_timeout governs x-envoy-expected-rq-timeout-ms between
//     two Envoys; the transport sends neither it nor the timeout headers.
//   - strict_check_headers may list x-envoy-max-retries: the value must be an
//     integer, which "0" is.
//
// What could not be checked here: no Envoy binary was at hand, so no test runs one.
// The tests run real loopback servers that answer as Envoy's docs say it does. They
// check what the transport sends and how it reads the answers. Whether a given
// sidecar treats the app as internal, and so honours x-envoy-max-retries, depends
// on its configuration. An x-envoy-attempt-count above 1 under MeshBackstopOwns
// shows that it did not; MeshObserver hears it.
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
