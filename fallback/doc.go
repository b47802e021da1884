// Package fallback answers a failed call with something else: a fixed value, a value
// worked out from the failure, or the last good value a call returned. It is the
// last resort of a pipeline — Wrap(fallback, deadline, breaker, retry, …) — and the
// ordering rules keep it there.
//
// # Where it stands
//
// A fallback is a policy of kind fallback, and rule O7 places it outside every stage
// whose failures it answers: outside the retry, so the retry sees every failure and
// the fallback only its last; outside the breaker, the bulkhead, the rate limiter and
// the throttle, so their refusals fall back; outside the overall deadline, so a
// dependency that did not answer in time falls back too. Only a shedder and
// third-party policies may stand outside it. A pipeline holds at most one.
//
// # What it answers
//
// [DefaultHandle] decides, unless Options.Handle replaces it. It answers every
// failure except:
//   - when the caller has gone: its context (the one the fallback runs under) is
//     cancelled or past its own deadline. Nobody waits for an answer, and the caller's
//     error is the truthful one. An overall deadline inside the fallback ends only its
//     own context, so a call it timed out falls back.
//   - under a retry owner further up the call path (callpath.Owned: a retrying
//     pipeline in this process, or one in another process that sent its attempt
//     header), a failure that owner may retry — marked retryable (fault.Retryable,
//     After, Refused, a Pushback to retry), a timeout, a refused or reset connection.
//     Answering it would end the owner's retries with a made-up success; the failure
//     goes up, and the owner retries it. A refusal (policy.ErrRejected: a breaker
//     open, a bulkhead full, a rate limiter out of tokens) is answered, even under an
//     upstream owner: no retry retries a refusal, so the fallback's answer is the
//     best the owner can get. When a dependency stays down, its breaker opens, and
//     from then on every call falls back.
//
// # Getting the value
//
// The value reaches the caller through [Fallback.Get], which runs fn under the
// pipeline as policy.Get does and returns the fallback's answer when the fallback
// answered. Under Pipeline.Do or policy.Get the fallback has no way to hand a value
// over, so it steps aside and the failure is returned as it is: a fallback never
// turns a failure into a zero value and a nil error. The same holds in a pipeline that
// Backstop runs with Do for you — policyhttp's transport, policygrpc's interceptors —
// where there is no value to replace: put the fallback in a pipeline of its own around
// the code that makes the request and reads its answer, and call it with Get.
//
// For a keyed last good value (per user, per product), put a coalesce.Cache in front
// of the dependency: its StaleIfError serves the last value of each key.
//
// # Events
//
// Every answer is reported as an event.Fallback: the fallback's name, why the call
// failed (Reason: its policy.Outcome — "failure", "rejected", "deadline"), what
// answered (To: "value", "func", "last-good") and the failure itself.
package fallback

// Kind is the fallback's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "fallback"
