// Package policyenvoy reads an Envoy route's retry policy — from YAML or JSON, into
// Envoy's own types (go-control-plane) and through Envoy's own validation — and builds
// the Backstop pipeline and policyhttp classifier that do the same, so that a retry
// policy can move between the mesh and the application, and [Route.Explain] can say
// what it will do before production finds out.
//
// # What it reads
//
// [Parse] takes a RouteConfiguration, a VirtualHost, a Route, a Route without match
// (the route: block Envoy users paste, read as matching every path) or a bare
// RouteAction. A refusal lists every problem of the input in one error, in the
// input's order. Each is a [*ConfigError] matching [ErrInvalid] that names the line
// and column in the input and the field's path as the input spells it
// ("line 8, column 5: route.retry_policy.num_retrys: unknown field …"), never
// positions in the JSON the YAML is converted to. Each says how to fix it: "did you
// mean num_retries?", "want a duration such as "1.5s"". A syntax error stops the
// reading. Malformed JSON is named by line and column, a YAML syntax error by its
// line. The YAML reader gives no column: such an error is placed at the line's
// first character. A negative duration anywhere is refused, as Envoy refuses it, matching
// [ErrNegativeDuration]. [Route.Position] places a route's fields in the input, for
// tools that report on them.
//
// # What is honoured
//
// The route's timeout (Envoy's default 15 s; 0 turns it off) becomes an overall
// deadline; retry_policy.num_retries (default 1) the attempts; per_try_timeout a
// per-attempt timeout; retry_back_off Envoy's fully jittered backoff (base 25 ms, max
// 10 × base); retry_on the conditions 5xx, gateway-error, reset, connect-failure,
// retriable-4xx, refused-stream and retriable-status-codes (with
// retriable_status_codes); and a response carrying x-envoy-ratelimited is retried only
// under envoy-ratelimited, as in Envoy.
//
// # Rate-limited back-off
//
// rate_limited_retry_back_off is followed as Envoy documents it. On a response that
// retry_on retries, its reset_headers are tried in order: a SECONDS header gives that
// many seconds, a UNIX_TIMESTAMP header the time from now (in whole seconds) to it.
// A header that is missing, unreadable, in the past, or whose interval exceeds
// max_interval (default [DefaultRateLimitedMaxInterval], 300 s) is passed over for the
// next; with none left — or an interval of 0 — the route's retry_back_off applies.
// Otherwise the retry waits random(interval, 1.5 × interval) instead of the back-off.
// Where Envoy would wait out a wait that passes the route's timeout and then answer
// 504, Backstop does not start it: the call ends at once with the last response.
// Unlike Envoy, whose back-off counts only the retries it timed, the route's back-off
// counts every retry of the call.
//
// # What is not
//
// A field or condition Backstop cannot honour — retriable_headers,
// retriable_request_headers, retry_priority, retry_host_predicate,
// host_selection_retry_max_attempts, retry_options_predicates, per_try_idle_timeout,
// hedge_policy, and gRPC's retry conditions on an HTTP route — is listed by name in
// [Route.Unsupported], never silently dropped. A retry_on condition Envoy does not
// know (see [RetryOnConditions]) is listed in [Route.UnknownRetryOn]: Envoy never
// retries on it either. In an input refused for other problems, it is one more
// problem, matching [ErrUnknownRetryOn].
package policyenvoy
