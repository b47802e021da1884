// Package bulkhead caps how many calls this process makes to one dependency at once:
// at most MaxConcurrent run, at most MaxQueue more wait for a slot, each for no longer
// than MaxWait and never past its context's deadline. A call that finds no room is
// refused at once with a [*RejectError] — the library's common refusal: it matches
// [ErrFull] and policy.ErrRejected, implements policy.Rejection, and carries a
// Retry-After estimated from how long calls hold their slots — so one slow dependency
// cannot take every goroutine, connection and socket of the process with it.
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
