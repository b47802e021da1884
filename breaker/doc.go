// Package breaker is a circuit breaker for Backstop pipelines, on
// github.com/sony/gobreaker/v2. Servers and operators can see into it.
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
// A refusal is a *policy.RejectError with Policy [Kind] and Err [ErrOpen]. It
// matches ErrOpen and policy.ErrRejected, so no retry retries it. Its Reason says
// why, and its RetryAfter when to come back:
//
//   - [ReasonOpen]: open. RetryAfter is the time left until the next probe, rounded
//     up to the millisecond.
//   - [ReasonHalfOpen]: half-open, with its probes out. RetryAfter is OpenTimeout, the
//     time the probes are given.
//   - [ReasonForced]: forced open by an operator. RetryAfter is MaxOpenTimeout.
//   - [ReasonSlowStart]: just closed, and Options.SlowStart holds the call back.
//     RetryAfter is a tenth of SlowStart.
//
// An open breaker lets its probe through at the refusal's time plus its
// RetryAfter. [Breaker.OpenNow] and [Breaker.Snapshot] tell that time too.
// Refusals are shared by many calls: treat them as read-only. An open breaker
// builds a refusal at most once a millisecond. The other refusals are built once.
//
// # Letting go
//
// A breaker that trips stays open OpenTimeout: 750 ms, up to 10 % longer at
// random. It then lets HalfOpenProbes (1) calls through as probes, one interval at
// a time. A probe that succeeds closes the breaker. One that fails keeps it open
// until an interval after the probe went out. A probe that hangs holds back
// nothing but itself. The next goes an interval later, whether or not it has
// answered. Take a breaker with default Options. A dependency back from an outage
// of any length gets traffic within 0.85 s of its return. A dead one sees about
// 1.25 probes a second from each process. With fleet.NewBreaker, that is from the
// whole fleet.
//
// The interval trades probes against time to recover. The table was measured on a
// fake clock, with 50 calls a second. The outages lasted 10 s to 10 min, and
// refused or hung:
//
//	| interval                  | probes/s while down | back after (worst) |
//	|---------------------------|---------------------|--------------------|
//	| 750 ms (default)          | 0.9–1.25            | 0.76 s             |
//	| 1 s                       | 0.7–0.9             | 1 s                |
//	| 1 s doubling to 30 s      | 0.04–0.3            | 12 s               |
//	| 5 s                       | 0.1–0.2             | 5.1 s              |
//	| 250 ms                    | 2.9–3.7             | 0.26 s             |
//
// Set MaxOpenTimeout above OpenTimeout to probe a long outage ever more rarely.
// The interval then doubles after each failed probe, as Envoy's outlier detection
// lengthens an ejection. The dependency is then found back later. OpenJitter
// spreads the probes of many clients. A refusal from below may answer a probe: an
// excluded error. That probe decides nothing, and gives its turn to the next call.
//
// # Slow start
//
// Options.SlowStart is off by default. A dependency behind a Backstop shedder
// sheds its own surge. A retry owner's budget bounds the retries that come back.
// Turn slow start on in front of a dependency that cannot shed: a database, a
// service without admission control.
//
// # What counts
//
// A nil error is a success. Other errors are failures, except those
// [DefaultIsExcluded] leaves out. It leaves out the caller's cancellation,
// refusals by other policies, and errors marked with fault.Client. So overload
// protection and bad requests never trip a dependency's breaker.
// Options.FailureRatio switches from consecutive failures to a failure ratio over
// a rolling window.
//
// # Inspection
//
// [Breaker.State], [Breaker.Counts] and [Breaker.Snapshot] read a breaker. A
// [Registry] lists breakers. The breakerhttp.Handler serves them as JSON and as a
// small HTML page. Its package is
// github.com/backstop-go/backstop/breaker/breakerhttp. [Breaker.ForceOpen] and
// [Breaker.Reset] are for operators. That page offers them only with
// breakerhttp.AllowControl.
//
// # State changes
//
// gobreaker reports state changes under its mutex. Backstop queues them there, and
// delivers them after the call, outside every lock. They go to the pipeline's
// Observer (event.BreakerState) and to Options.OnStateChange. That hook may
// therefore call back into the breaker. Each event has Stage [Kind] and Source the
// breaker's name. Its From and To are "closed", "half_open" or "open", as
// [State.String] names them.
package breaker

// Kind is the breaker's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "breaker"
