// Package ratelimit is a client-side rate limiter as a policy: a token bucket
// (golang.org/x/time/rate) that lets Rate calls a second through, in bursts of up to
// Burst, so a client stays within a dependency's published quota instead of learning
// it from 429s.
//
// # Modes
//
// In [Wait] mode (the zero value) a call that finds no token waits for one — but never
// past its context's deadline, nor longer than MaxWait: when the token it reserved
// would come after either, the call is refused at once, without waiting, and the
// token is given back. A call whose context ends while it waits gives its token back
// too, so calls that never ran do not use the quota up. In [Refuse] mode a call that
// finds no token is refused at once.
//
// Every refusal is a *policy.RejectError with Policy [Kind] and a Reason:
// [ReasonNoToken], [ReasonDeadline] or [ReasonWaitLimit]. It matches [ErrLimited]
// and policy.ErrRejected. Its RetryAfter is when the token would have come.
//
// # Events and gauges
//
// A refusal is reported as an event.Rejected, with its Reason and its RetryAfter
// as Delay. A call that waited for its token and went through is reported as an
// event.Waited, with the wait as Delay. Both carry Stage [Kind] and Source, the
// limiter's name. A [*Limiter] is a policy.Publisher: it publishes the gauge
// "tokens", the tokens in its bucket.
//
// # Where it stands
//
// A rate limiter is a policy of kind rate_limit, placed like a breaker: outside or
// inside the retry, inside a fallback (O7) and a shedder (O5). Inside the retry —
// Wrap(deadline, retry, limiter, perAttempt) — it counts attempts, which is what a
// provider's quota counts, so retries spend tokens too: the place to reach for.
// Outside the retry it counts calls, and a call's retries are free.
//
// # Sharing
//
// A [*Limiter] bound into several pipelines is one bucket for all of them. A
// [Registry] hands out one Limiter per name, so pipelines built apart (from a config
// file, in different packages) that name the same limiter share its bucket.
package ratelimit

// Kind is a rate limiter's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "rate_limit"
