// Package bulkhead caps how many calls this process makes to one dependency at once:
// at most MaxConcurrent run, at most MaxQueue more wait for a slot, each for no longer
// than MaxWait and never past its context's deadline. A call that finds no room is
// refused, so one slow dependency cannot take every goroutine, connection and socket
// of the process with it.
//
// # Refusals
//
// A refusal is a *policy.RejectError with Policy [Kind] and a Reason: [ReasonLimit],
// [ReasonQueue], [ReasonWait] or [ReasonDeadline]. It matches [ErrFull] and
// policy.ErrRejected; a ReasonDeadline refusal matches context.DeadlineExceeded too.
// Its RetryAfter is estimated from how long calls hold their slots; 0 before any
// call has ended.
//
// # Events and gauges
//
// Each refusal is reported as an event.Rejected with Stage [Kind], Source the
// bulkhead's name, its Reason, its RetryAfter as Delay and the time waited as
// Elapsed. A [*Bulkhead] is a policy.Publisher: it publishes the gauges "inflight"
// (slots taken), "waiting" (calls queued) and "limit" (MaxConcurrent).
//
// # Where it stands
//
// A bulkhead is a policy of kind bulkhead, placed like a breaker: outside or inside
// the retry, inside a fallback (O7) and a shedder (O5).
//
//   - Inside the retry — Wrap(deadline, retry, bulkhead, perAttempt) — it counts
//     attempts: a slot is held while an attempt runs and given back during the
//     retry's sleeps, so the cap is on what the dependency sees at once. Its refusal
//     is never retried: it ends the call at the attempt it refuses. This is the place
//     to reach for.
//   - Outside the retry — Wrap(deadline, bulkhead, retry) — it counts calls: a slot
//     is held for the whole call, sleeps included, and a refusal comes before any
//     attempt. Use it to cap the callers a dependency can hold up, whatever their
//     retries do.
//
// A slot is given back when the call (the attempt, inside the retry) returns: a
// response body read after policyhttp's RoundTrip has returned holds no slot.
//
// # Cost
//
// Admission is one non-blocking channel send (one short lock in the runtime, no
// allocation); a call that must wait takes a queue place with a compare-and-swap and
// waits on the channel — first come, first served among the waiting, though a call
// that arrives just as a slot frees may take it — with a timer only when MaxWait ends
// before the context's deadline. The mean time a slot is held, from which refusals estimate their
// Retry-After, is kept from the first 16 calls and then a random one in 16, so most
// calls read no clock.
package bulkhead

// Kind is the bulkhead's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "bulkhead"
