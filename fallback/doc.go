// Package fallback answers a failed call with something else. It answers with a
// fixed value, a value worked out from the failure, or the last good value a call
// returned. It is the last resort of a pipeline: Wrap(fallback, deadline, breaker,
// retry, …). The ordering rules keep it there.
//
// # Where it stands
//
// A fallback is a policy of kind fallback. Rule O7 places it outside every stage
// whose failures it answers:
//   - outside the retry, so the retry sees every failure and the fallback only its
//     last;
//   - outside the breaker, the bulkhead, the rate limiter and the throttle, so
//     their refusals fall back;
//   - outside the overall deadline, so a dependency that did not answer in time
//     falls back too.
//
// Only a shedder and third-party policies may stand outside it. A pipeline holds
// at most one.
//
// # What it answers
//
// [DefaultHandle] decides, unless Options.Handle replaces it. It answers every
// failure except:
//   - when the caller has gone. Its context, the one the fallback runs under, is
//     cancelled or past its own deadline. Nobody waits for an answer, and the
//     caller's error is the truthful one. An overall deadline inside the fallback
//     ends only its own context. So a call it timed out falls back.
//   - under a retry owner further up the call path, a failure that owner may
//     retry. The owner (callpath.Owned) is a retrying pipeline in this process. Or
//     it is one in another process that sent its attempt header. The failure is
//     marked retryable (fault.Retryable, After, Refused, a Pushback to retry). Or
//     it is a timeout, or a refused or reset connection. Answering it would end the
//     owner's retries with a made-up success. The failure goes up, and the owner
//     retries it.
//
// A refusal is answered, even under an upstream owner: policy.ErrRejected, such as
// a breaker open, a bulkhead full, a rate limiter out of tokens. No retry retries a
// refusal. So the fallback's answer is the best the owner can get. When a
// dependency stays down, its breaker opens. From then on, every call falls back.
//
// # Getting the value
//
// The value reaches the caller through [Fallback.Get]. It runs fn under the
// pipeline as policy.Get does. It returns the fallback's answer when the fallback
// answered. Under Pipeline.Do or policy.Get, the fallback has no way to hand a
// value over. So it steps aside, and the failure is returned as it is. A fallback
// never turns a failure into a zero value and a nil error. The same holds in a
// pipeline that Backstop runs with Do for you: policyhttp's transport,
// policygrpc's interceptors. There is no value to replace there. Put the fallback
// in a pipeline of its own, around the code that makes the request and reads its
// answer. Call it with Get.
//
// For a keyed last good value (per user, per product), put a coalesce.Cache in
// front of the dependency. Its StaleIfError serves the last value of each key.
//
// # Events
//
// Every answer is reported as an event.Fallback. It carries the fallback's name,
// and why the call failed: Reason, its policy.Outcome ("failure", "rejected",
// "deadline"). It says what answered: To, one of "value", "func", "last_good". It
// carries the failure itself.
package fallback

// Kind is the fallback's Placement.Kind: its events' Stage and its refusals' Policy.
const Kind = "fallback"
