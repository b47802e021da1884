// Package coalesce is a cache in front of a dependency that never stampedes:
//   - When a hot key expires, one request rebuilds the value while the others
//     wait for it (single flight).
//   - The stale value is served while it is refreshed in the background.
//   - The last good value is served for a while when the origin fails.
//   - Failures are cached briefly, so a failing origin is not hammered.
//   - TTLs are jittered, so keys written together do not expire together.
//
// An optional early, probabilistic refresh (XFetch) refreshes a hot key before it
// expires.
//
// Origin calls run through a *policy.Pipeline. So the deadline, breaker and budget
// of the dependency apply to them. With the breaker open, a stale value is served
// rather than the refusal. Storage is size-bounded by github.com/maypok86/otter/v2,
// whose reads take no lock.
//
// # Freshness
//
//	| age of the entry                  | Get returns                   | origin call                |
//	|-----------------------------------|-------------------------------|----------------------------|
//	| < TTL (jittered)                  | the value                     | none (XFetch: maybe early) |
//	| TTL … TTL + StaleWhileRefresh     | the stale value, at once      | one refresh, in background |
//	| later                             | a fresh value, waited for     | one load for all callers   |
//	| load failed, < TTL + StaleIfError | the last good value           | retried after NegativeTTL  |
//
// # Keys
//
// Keys are compared with ==, as map keys are. Two keys share a load and an entry
// only if they are equal. So {Tenant: int64(7)} and {Tenant: int(7)} are two keys,
// however alike they print. A key that is not equal to itself (it holds a NaN)
// shares nothing, and is not stored. A key whose == panics (an interface field
// holding a slice) panics in Get, on the caller's goroutine.
//
// # Loads
//
// A load runs on a goroutine of its own, detached from its callers' contexts. It
// keeps their values. At most one runs per key at a time. It publishes its result
// to every caller still waiting. A caller whose context ends returns at once with
// the context's error, and leaves nothing behind. The load goes on for the others,
// and its value is kept. A load is bounded by the Pipeline's deadline or
// per-attempt timeout, or by Options.LoadTimeout. With neither, it is bounded by
// [DefaultLoadTimeout] (10 s). An origin that hangs holds one goroutine per key for
// that long, never one per caller. [Cache.Close] waits for the loads under way.
//
// # Panics
//
// A panic in Load never ends the process. Nor does one in a stage or observer of
// the Pipeline, on the load's goroutine. It is recovered, and becomes the load's
// error: a *policy.PanicError carrying the panic's value and stack. Every caller
// waiting for that load receives it; errors.As finds it. It is reported as an
// event.Panic (Source [PanicSource]) to Options.Observer. It is counted in
// Stats.Panics. It is a failed load like any other. It is remembered for
// NegativeTTL, with the last good value served over it within StaleIfError.
// Recovered inside the pipeline, it is a failed attempt to the pipeline's stages.
// A breaker counts it; a retry does not retry it. A runtime.Goexit in Load ends
// the load with an error too.
package coalesce
