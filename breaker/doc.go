// Package breaker is a circuit breaker for Backstop pipelines, on
// github.com/sony/gobreaker/v2, that servers and operators can see into.
//
// # In a pipeline
//
//	b, err := breaker.New("db", breaker.Options{})       // trips after 5 failures in a row
//	p, err := policy.Wrap(deadline, b, retry)             // outside the retry: counts calls
//	p, err := policy.Wrap(deadline, retry, b)             // inside: counts attempts
//
// An open breaker refuses calls with an [*OpenError] that matches [ErrOpen] and
// policy.ErrRejected, so no retry retries it, and whose Until says when probes will be
// let through: [Breaker.RetryAfter] turns it into a server's Retry-After.
//
// # What counts
//
// A nil error is a success; other errors are failures except those
// [DefaultIsExcluded] leaves out — the caller's cancellation, refusals by other
// policies, errors marked with [ClientFault] — so overload protection and bad requests
// never trip a dependency's breaker. Options.FailureRatio switches from consecutive
// failures to a failure ratio over a rolling window.
//
// # Inspection
//
// [Breaker.State], [Breaker.Counts] and [Breaker.Snapshot] read a breaker; a
// [Registry] lists breakers; [Handler] serves them as JSON and as a small HTML page.
// [Breaker.ForceOpen] and [Breaker.Reset] are for operators, on the handler only with
// [AllowControl].
//
// # State changes
//
// gobreaker reports state changes under its mutex; Backstop queues them there and
// delivers them after the call, outside every lock, to the pipeline's Observer
// (EventBreakerState) and to Options.OnStateChange, which may therefore call back into
// the breaker.
package breaker
