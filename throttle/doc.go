// Package throttle is client-side adaptive throttling, as the Google SRE book
// describes it ("Handling Overload", client-side throttling). Each client keeps
// two counts over the last Window: the requests it made, and the requests its
// backend accepted. It refuses a new request itself, without sending it, with
// probability
//
//	max(0, (requests − K × accepts) / (requests + 1))
//
// While the backend accepts everything, nothing is refused. When it starts
// refusing, the client sends it about K times what it accepts. It refuses the rest
// locally, at no cost to the backend. Refused requests still count as requests. So
// the less the backend accepts, the more the client refuses. K = 2 is the book's
// choice. It lets the backend see twice the load it accepts: enough to learn of its
// recovery at once.
//
// Unlike a retry budget, a throttle refuses first attempts too. A client stops
// sending work that a backend is turning away. Its refusals match
// policy.ErrRejected, so no retry retries them.
//
// A refusal is a *policy.RejectError with Policy [Kind] and Reason "throttled". It
// matches [ErrThrottled]. Its RetryAfter is 0: the throttle names no time. One
// error is shared by all of a throttle's refusals, so refusing allocates nothing.
//
// # Where it stands
//
// A throttle is a policy of kind throttle, placed like a breaker. It stands
// outside or inside a retry, never outside a shedder (O5). Inside the retry, as in
// Wrap(deadline, budget, retry, throttle), it counts attempts. That is what the
// backend sees. Its refusal ends the call at the attempt it refuses. Outside, it
// counts calls, and refuses a call before any attempt. Inside is the book's model,
// and the default to reach for.
package throttle

// Kind is the throttle's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "throttle"
