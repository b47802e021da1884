// Package breaker is a circuit breaker for Backstop pipelines, on
// github.com/sony/gobreaker/v2, that servers and operators can see into.
//
// # In a pipeline
//
//	b, err := breaker.New(breaker.Options{Name: "db"}) // trips after 5 failures in a row
//	calls, err := policy.Wrap(deadline, b, retry)   // outside the retry: counts calls
//	attempts, err := policy.Wrap(deadline, retry, b) // inside: counts attempts
//
// An open breaker refuses calls at once, before any attempt.
//
// # Refusals
//
// A refusal is a *policy.RejectError with Policy [Kind] and Err [ErrOpen]. It matches
// ErrOpen and policy.ErrRejected, so no retry retries it. Its Reason says why, and its
// RetryAfter when to come back:
//
//   - [ReasonOpen]: open. RetryAfter is the time left until the next probe, rounded
//     up to the millisecond.
//   - [ReasonHalfOpen]: half-open, with its probes out. RetryAfter is OpenTimeout, the
//     time the probes are given.
//   - [ReasonForced]: forced open by an operator. RetryAfter is MaxOpenTimeout.
//   - [ReasonSlowStart]: just closed, and Options.SlowStart holds the call back.
//     RetryAfter is a tenth of SlowStart.
//
// An open breaker lets its probe through at the refusal's time plus its RetryAfter.
// [Breaker.OpenNow] and [Breaker.Snapshot] tell that time too. Refusals are shared by
// many calls: treat them as read-only. An open breaker builds a refusal at most once
// a millisecond; the other refusals are built once.
//
// # Letting go
//
// A breaker that trips stays open OpenTimeout (750 ms, up to 10 % longer at random),
// then lets HalfOpenProbes (1) calls through as probes, one interval at a time. A
// probe that succeeds closes the breaker; one that fails keeps it open until an
// interval after the probe went out. A probe that hangs holds back nothing but
// itself: the next goes an interval later whether or not it has answered. So with
// default Options a dependency back from an outage of any length gets traffic
// within 0.85 s of its return, and a dead one sees about 1.25 probes a second from
// each process (fleet.NewBreaker: from the whole fleet).
//
// The interval trades probes against time to recover. On a fake clock, 50 calls a
// second, outages of 10 s to 10 min that refuse or hang:
//
//	| interval                  | probes/s while down | back after (worst) |
//	|---------------------------|---------------------|--------------------|
//	| 750 ms (default)          | 0.9–1.25            | 0.76 s             |
//	| 1 s                       | 0.7–0.9             | 1 s                |
//	| 1 s doubling to 30 s      | 0.04–0.3            | 12 s               |
//	| 5 s                       | 0.1–0.2             | 5.1 s              |
//	| 250 ms                    | 2.9–3.7             | 0.26 s             |
//
// Set MaxOpenTimeout above OpenTimeout to probe a long outage ever more rarely,
// doubling the interval after each failed probe as Envoy's outlier detection
// lengthens an ejection; the dependency is then found back later. OpenJitter
// spreads the probes of many clients. A probe that a refusal from below answers
// (an excluded error) decides nothing and gives its turn to the next call.
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
// the breaker. Each event has Stage [Kind] and Source the breaker's name. Its From
// and To are "closed", "half_open" or "open", as [State.String] names them.
package breaker

// Kind is the breaker's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "breaker"
