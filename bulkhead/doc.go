// Package bulkhead caps how many calls this process makes to one dependency at
// once. At most MaxConcurrent run. At most MaxQueue more wait for a slot. Each
// waits no longer than MaxWait, and never past its context's deadline. A call that
// finds no room is refused. So one slow dependency cannot take every goroutine,
// connection and socket of the process with it.
//
// # Refusals
//
// A refusal is a *policy.RejectError with Policy [Kind] and a Reason:
// [ReasonLimit], [ReasonQueue], [ReasonWait] or [ReasonDeadline]. It matches
// [ErrFull] and policy.ErrRejected. A ReasonDeadline refusal matches
// context.DeadlineExceeded too. Its RetryAfter is estimated from how long calls
// hold their slots. It is 0 before any call has ended.
//
// # Events and gauges
//
// Each refusal is reported as an event.Rejected with Stage [Kind]. Its Source is
// the bulkhead's name. It carries its Reason, its RetryAfter as Delay, and the
// time waited as Elapsed. A [*Bulkhead] is a policy.Publisher. It publishes the
// gauges "inflight" (slots taken), "waiting" (calls queued) and "limit"
// (MaxConcurrent).
//
// # Where it stands
//
// A bulkhead is a policy of kind bulkhead, placed like a breaker. It stands
// outside or inside the retry, inside a fallback (O7) and a shedder (O5).
//
//   - Inside the retry, as in Wrap(deadline, retry, bulkhead, perAttempt), it
//     counts attempts. A slot is held while an attempt runs. It is given back
//     during the retry's sleeps. So the cap is on what the dependency sees at
//     once. Its refusal is never retried: it ends the call at the attempt it
//     refuses. This is the place to reach for.
//   - Outside the retry, as in Wrap(deadline, bulkhead, retry), it counts calls. A
//     slot is held for the whole call, sleeps included. A refusal comes before any
//     attempt. Use it to cap the callers a dependency can hold up, whatever their
//     retries do.
//
// A slot is given back when the call returns; inside the retry, the attempt. A
// response body read after policyhttp's RoundTrip has returned holds no slot.
//
// # Cost
//
// Admission is one non-blocking channel send: one short lock in the runtime, no
// allocation. A call that must wait takes a queue place with a compare-and-swap. It
// then waits on the channel. The waiting are served first come, first served. But
// a call that arrives just as a slot frees may take it. A timer is set only when
// MaxWait ends before the context's deadline. Refusals estimate their Retry-After
// from the mean time a slot is held. That mean is kept from the first 16 calls,
// then from a random one in 16. So most calls read no clock.
package bulkhead

// Kind is the bulkhead's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "bulkhead"
