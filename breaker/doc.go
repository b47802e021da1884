// Package breaker is a circuit breaker for Backstop pipelines, on
// github.com/sony/gobreaker/v2, that servers and operators can see into.
//
// # In a pipeline
//
//	b, err := breaker.New("db", breaker.Options{}) // trips after 5 failures in a row
//	calls, err := policy.Wrap(deadline, b, retry)   // outside the retry: counts calls
//	attempts, err := policy.Wrap(deadline, retry, b) // inside: counts attempts
//
// An open breaker refuses calls with an [*OpenError] that matches [ErrOpen] and
// policy.ErrRejected, so no retry retries it, and whose Until says when probes will be
// let through: [Breaker.OpenNow] and the refusal's RetryAfter (a policy.Rejection) turn it into a server's Retry-After.
//
// # Letting go
//
// A breaker that trips from closed stays open OpenTimeout (1 s), then lets
// HalfOpenProbes (1) calls through; a probe that succeeds closes it, one that fails
// opens it again for twice as long, up to MaxOpenTimeout (30 s). The open time tracks
// the outage: a blip costs a second, a long outage is probed ever more rarely, and the
// first trip after the breaker closed is short again. OpenJitter (10 %) lengthens each
// open period at random so the breakers of many clients do not probe in step. A
// breaker in front of a cheap probe may probe far more often: the storm's breakers
// probe a down database every 50 ms (OpenTimeout = MaxOpenTimeout = 50 ms), a few per
// cent of the load the owner rule alone sends it, and find it back within about 50 ms.
// A probe that a refusal from below answers (an excluded error) decides nothing and
// frees its slot for the next call.
//
// # What counts
//
// A nil error is a success; other errors are failures except those
// [DefaultIsExcluded] leaves out — the caller's cancellation, refusals by other
// policies, errors marked with fault.Client — so overload protection and bad requests
// never trip a dependency's breaker. Options.FailureRatio switches from consecutive
// failures to a failure ratio over a rolling window.
//
// # Inspection
//
// [Breaker.State], [Breaker.Counts] and [Breaker.Snapshot] read a breaker; a
// [Registry] lists breakers; breakerhttp.Handler (package
// github.com/backstop-go/backstop/breaker/breakerhttp) serves them as JSON and as a
// small HTML page. [Breaker.ForceOpen] and [Breaker.Reset] are for operators, on that
// page only with breakerhttp.AllowControl.
//
// # State changes
//
// gobreaker reports state changes under its mutex; Backstop queues them there and
// delivers them after the call, outside every lock, to the pipeline's Observer
// (event.BreakerState) and to Options.OnStateChange, which may therefore call back into
// the breaker.
package breaker
