// Package chaos injects faults on purpose. Users test with it how their code and
// its Backstop pipelines behave when a dependency misbehaves. It adds latency,
// errors, HTTP statuses with Retry-After, reset connections, and slow or truncated
// bodies.
//
// An [Injector] is a policy (KindOther) and a net/http middleware. It affects a
// call with Options.Probability, drawn from the one random seam (jitter.Rand). It
// waits on the one clock seam (clock.Clock). So tests are deterministic.
// [Injector.Enable] turns it on and off at run time, safely from any goroutine.
// While off, it costs one atomic load.
//
// # Where it stands
//
// As a policy, it may stand anywhere, as every KindOther policy. Inside the retry,
// it fails attempts: the retry sees each fault. Outside it, it fails whole calls:
// the retry never runs for them. Outside a breaker, it never reaches the breaker's
// counts.
//
//	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.3, Err: fault.Retryable(errors.New("injected"))}))
//	p := policy.Must(policy.Wrap(deadline, breaker, budget, retry, inj)) // 30 % of attempts fail
//
// As middleware it wraps a test server's handler: [Injector.Middleware].
package chaos
