// Package sim runs Backstop's real stages — retry, deadline, budget, breaker, the
// shedder, through policyhttp's transport and middlewares — over a graph of simulated
// services in virtual time: the same scenario and seed give the same figures, byte for
// byte, and a 20 s outage takes the time its events take to compute, not 20 s.
//
// # Time
//
// The stages wait in goroutines: a retry's backoff on its clock.Clock's timer, a
// deadline on a context.WithTimeout, and the breaker (gobreaker) reads time.Now, with no
// clock of its own in breaker.Options. A simulator that calls the stages must therefore
// advance time only when every goroutine of the run is blocked, and must make the
// runtime's time (contexts, gobreaker) agree with its own. Two designs were weighed:
//
//   - A cooperative scheduler alone (the simulator calls the stages and fires a virtual
//     clock's timers from its event loop) cannot tell when a stage's goroutine has
//     blocked in a select, and leaves context deadlines and gobreaker on the wall
//     clock: the breaker would need a clock seam outside gobreaker, and the deadline
//     stage one too.
//   - testing/synctest gives both: inside a bubble, time.Now, timers and context
//     deadlines are virtual, and synctest.Wait returns once every other goroutine of
//     the bubble is durably blocked.
//
// sim uses both together. Every run happens inside a synctest bubble ([Run] calls
// synctest.Test), so the runtime's time is virtual and nothing sleeps on the wall
// clock. Within it a discrete-event engine orders the simulation's own events —
// arrivals, the end of each piece of work, the timers of the clock.Clock it gives the
// stages — by (time, order of scheduling), fires one, then waits (synctest.Wait)
// until what it set off has settled before it fires the next. That serialisation is
// what makes a run repeatable: two goroutines never run at once on the engine's
// account. The only wakeups outside the engine are the runtime's own timers (context
// deadlines); the engine sleeps on the bubble's clock to its next event, so they fire
// at their virtual time, and a goroutine one of them wakes that schedules an earlier
// event wakes the engine. One case is left to the runtime's scheduler: two runtime
// timers due at the same nanosecond wake their goroutines together. Times come from
// Poisson arrivals and random draws, so such ties are rare; the tests check that
// GOMAXPROCS 1 and 4 give the same summaries.
//
// The stages' own cost bounds a run's speed, not the engine's: in a profile of the
// 1 000-service graph the engine's loop is about 8 % of the time, the stages about
// half, the simulated services and wire a quarter. A run is serial, so it is fastest
// on one processor ([Tune]).
//
// The price is that synctest.Test needs a *testing.T: a simulation runs in a test
// (go test), which is where a user asserts "my stack recovers within 1 s of a 7 s
// outage"; the commands (sim/cmd/backstopsim, backstop sim) run theirs as the one test
// of testing.Main ([Main]).
//
// # Models
//
// A [Service] has Workers (its concurrency), a service-time [Dist], a bounded or
// unbounded Queue, and a schedule of [Fault]s (down, slow, erroring with Retry-After,
// each fading out over a Recover time). It calls its dependencies (Calls) one after
// another through an in-process http.RoundTripper: real requests with real headers
// (Backstop-Attempt, Retry-After, Backstop-Refused) into the dependency's real
// http.Handler, in the caller's goroutine, with no network. Each service's [Stack]
// decides its clients and its guard: a naive retry loop, Backstop's owner rule alone,
// or the whole Backstop stack — those of examples/storm. Users are open-loop Poisson
// arrivals ([Load]) that give up after a timeout.
package sim
