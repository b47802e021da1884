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
// Every refusal is a [*RejectError]: it matches [ErrLimited] and policy.ErrRejected,
// implements policy.Rejection, and its RetryAfter is when the token would have come.
//
// # Where it stands
//
// A rate limiter is a policy of kind rate-limit, placed like a breaker: outside or
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
