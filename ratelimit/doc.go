// Package ratelimit is a client-side rate limiter as a policy. It is a token
// bucket (golang.org/x/time/rate) that lets Rate calls a second through, in bursts
// of up to Burst. With it, a client stays within a dependency's published quota.
// It does not learn the quota from 429s.
//
// # Modes
//
// In [Wait] mode (the zero value), a call that finds no token waits for one. It
// never waits past its context's deadline, nor longer than MaxWait. The token it
// reserved may come after either. The call is then refused at once, without
// waiting, and the token is given back. A call whose context ends while it waits
// gives its token back too. So calls that never ran do not use the quota up. In
// [Refuse] mode, a call that finds no token is refused at once.
//
// Every refusal is a *policy.RejectError with Policy [Kind] and a Reason:
// [ReasonNoToken], [ReasonDeadline] or [ReasonWaitLimit]. It matches [ErrLimited]
// and policy.ErrRejected. Its RetryAfter is when the token would have come.
//
// # Events and gauges
//
// A refusal is reported as an event.Rejected, with its Reason and its RetryAfter
// as Delay. A call that waited for its token and went through is reported as an
// event.Waited, with the wait as Delay. Both carry Stage [Kind], and Source the
// limiter's name. A [*Limiter] is a policy.Publisher. It publishes the gauge
// "tokens", the tokens in its bucket.
//
// # Where it stands
//
// A rate limiter is a policy of kind rate_limit, placed like a breaker. It stands
// outside or inside the retry, inside a fallback (O7) and a shedder (O5). Inside
// the retry, as in Wrap(deadline, retry, limiter, perAttempt), it counts attempts.
// That is what a provider's quota counts, so retries spend tokens too. This is
// the place to reach for. Outside the retry, it counts calls, and a call's retries
// are free.
//
// # Sharing
//
// A [*Limiter] bound into several pipelines is one bucket for all of them. A
// [Registry] hands out one Limiter per name. Pipelines may be built apart: from a
// config file, in different packages. Those that name the same limiter share its
// bucket.
package ratelimit

// Kind is a rate limiter's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "rate_limit"
