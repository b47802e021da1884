// Package config configures Backstop from a file: named stacks per dependency, a
// defaults stack they inherit from field by field, environment overrides for
// containers, and the routes that pick a stack per HTTP request and per gRPC method.
// It is a module of its own, so that the library module needs no YAML parser and no
// file watcher.
//
// # The file
//
// YAML or JSON (JSON is YAML). Durations are Go duration strings ("250ms", "1m30s");
// a bare number is refused, its unit being unclear. A worked example
// (testdata/backstop.yaml):
//
//	defaults:
//	  deadline: 2s
//	  breaker: {consecutive_failures: 5, open_timeout: 1s}
//	  retry: {attempts: 3, strategy: full, base: 100ms, cap: 1s}
//	  attempt_timeout: 500ms
//	stacks:
//	  payments:
//	    deadline: 3s                 # overrides the default's 2s
//	    breaker:
//	      consecutive_failures: 3    # open_timeout 1s is inherited
//	    budget:
//	      token_bucket: {max_tokens: 10, token_ratio: 0.1}
//	    retry:
//	      attempts: 4
//	      http_statuses: [429, 502, 503, 504]
//	      grpc_codes: [UNAVAILABLE, RESOURCE_EXHAUSTED]
//	  search:
//	    hedge: {attempts: 2, delay: 150ms}
//	    retry: {enabled: false}      # a retry or a hedge, not both (O2)
//	http:
//	  default: payments
//	  routes:
//	    - match: "GET /v1/search/"   # an http.ServeMux pattern
//	      stack: search
//	grpc:
//	  routes:
//	    - name: payments.v1.Payments # a service, or "pkg.Service/Method"
//	      stack: payments
//
// A stack's stages stand in the canonical order — rate_limit, deadline, bulkhead,
// throttle, breaker, budget, retry, hedge, attempt_timeout — which obeys every
// ordering rule, unless its order field lists them. A stage the defaults have is
// left out of a stack by enabled: false ("off" for a deadline or attempt timeout).
// The JSON Schema of the format is [Schema] (schema.json beside this file).
//
// # Environment
//
// BACKSTOP_<STACK>_<FIELD> overrides a field of a stack, BACKSTOP_DEFAULTS_<FIELD> a
// field of the defaults: the stack's name and the field's path upper-cased, with "-"
// and "." as "_" (BACKSTOP_PAYMENTS_RETRY_ATTEMPTS=4,
// BACKSTOP_PAYMENTS_EU_BREAKER_CONSECUTIVE_FAILURES=3,
// BACKSTOP_DEFAULTS_DEADLINE=750ms). The value is read as YAML, so lists work
// (BACKSTOP_PAYMENTS_RETRY_HTTP_STATUSES="[502, 503]"), and is checked as the file's
// values are; a problem in it is placed at $NAME. A variable that names a stack but
// no field, or a field but no stack, is a problem; others with the prefix
// (BACKSTOP_CONFIG) are left alone. [Options].Env is the environment read, so tests
// and programs say which.
//
// # Validation
//
// A file is checked whole before anything is built: unknown fields, values of the
// wrong type, bare-number durations, values the constructors refuse (each
// constructor's own check: nothing is checked twice), routes naming no stack, bad
// ServeMux patterns, and every stack's order against the ordering rules, by
// policy.CheckPlacements, with the rule number policy.Wrap would give. Every problem
// is reported, in file order, at file:line:column with its field path, what is wrong
// and its fix ([Problem].Fix): the range wanted and an example, the name meant, the
// move to make. A stack whose order is refused still has its fields checked; only a
// syntax error stops the check.
//
//	backstop.yaml:6:17: stacks.payments.retry.attempts: is 0; want ≥ 1, such as attempts: 3 (1 never retries)
//
// A refused file returns an [*Error] matching [ErrInvalid] (and policy.ErrOrder when
// a rule is broken).
//
// # Routing
//
// http.routes[].match is an http.ServeMux pattern (Go 1.22: "[METHOD ][HOST]/[PATH]"),
// matched by net/http's own matcher (policyhttp.Routes): the most specific pattern
// wins, then http.default; without a default, an unmatched request is sent with no
// pipeline. grpc.routes[].name is "pkg.Service/Method" or "pkg.Service", matched as a
// service config's names are (policygrpc.Routes), then grpc.default. [Config.Explain]
// covers both tables and every stack; `backstop explain -config` prints it.
//
// # Imports
//
// Envoy routes and gRPC service configs convert into the same model: [ImportEnvoy]
// takes what policyenvoy.Parse read, [ImportServiceConfig] what
// policygrpc.ParseServiceConfig read, and each returns an [Import]: the [File] (which
// [Encode] writes out), each stack's [Origin] (the route or methodConfig entry it
// was, whose [Origin.Field] names and places the original's field a stack's field
// came from), and a [Note] for everything the original says that the model says
// otherwise or cannot say — never dropped in silence. [Import.Build] loads an import
// as [Parse] loads a file, its problems placed in the original, so that one
// [Config] — and one path in `backstop explain` and `backstop lint` — serves all
// three formats. An Envoy route's stack has a retry of strategy envoy (Envoy's
// back-off) and max_hint off (Envoy waits its back-off whatever a server asks),
// unless rate_limited_retry_back_off gives a max_interval.
//
// # Reload
//
// A [Loader] holds the running [Config] and replaces it on [Loader.Reload] (for SIGHUP)
// or when [Loader.Watch] sees the file change: all or nothing, a refused file leaving
// the running configuration in place (reported as an error, an event.ConfigReload, a
// metric and a log line); calls in flight finish on the stack they started with; a
// stage whose settings did not change keeps its state (it is the same object), a
// changed one starts fresh (an event.StageReset says which), except that a breaker
// that was open stays open until the old one would have let probes through.
// [Loader.Transport] and [Loader.DialOptions] route by the running configuration.
package config
