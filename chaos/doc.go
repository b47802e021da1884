// Package chaos injects faults on purpose, for users' own tests of how their code and
// its Backstop pipelines behave when a dependency misbehaves: added latency, errors,
// HTTP statuses with Retry-After, reset connections, slow or truncated bodies.
//
// An [Injector] is a policy (KindOther) and a net/http middleware. It affects a call
// with Options.Probability, drawn from the one random seam (jitter.Rand), and waits on
// the one clock seam (clock.Clock), so tests are deterministic. [Injector.Enable]
// turns it on and off at run time, safely from any goroutine; while off it costs one
// atomic load.
//
// # Where it stands
//
// As a policy it may stand anywhere, as every KindOther policy: inside the retry it
// fails attempts (the retry sees each fault), outside it fails whole calls (the retry
// never runs for them), and outside a breaker it never reaches the breaker's counts.
//
//	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.3, Err: fault.Retryable(errors.New("injected"))}))
//	p := policy.Must(policy.Wrap(deadline, breaker, budget, retry, inj)) // 30 % of attempts fail
//
// As middleware it wraps a test server's handler: [Injector.Middleware].
package chaos
