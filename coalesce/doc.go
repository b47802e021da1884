// Package coalesce is a cache in front of a dependency that never stampedes: when a
// hot key expires, one request rebuilds the value while the others wait for it
// (single flight), the stale value is served while it
// is refreshed in the background, the last good value is served for a while when the
// origin fails, failures are cached briefly so a failing origin is not hammered, and
// TTLs are jittered so keys written together do not expire together. An optional
// early, probabilistic refresh (XFetch) refreshes a hot key before it expires.
//
// Origin calls run through a *policy.Pipeline, so the deadline, breaker and budget of
// the dependency apply to them; with the breaker open, a stale value is served rather
// than the refusal. Storage is size-bounded by github.com/maypok86/otter/v2, whose reads
// take no lock.
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
// Keys are compared with ==, as map keys are: two keys share a load and an entry only if
// they are equal, so {Tenant: int64(7)} and {Tenant: int(7)} are two keys however alike
// they print. A key that is not equal to itself (it holds a NaN) shares nothing and is
// not stored. A key whose == panics (an interface field holding a slice) panics in Get,
// on the caller's goroutine.
//
// # Loads
//
// A load runs on a goroutine of its own, detached from its callers' contexts (it keeps
// their values), at most one per key at a time, and publishes its result to every
// caller still waiting. A caller whose context ends returns at once with the context's
// error and leaves nothing behind; the load goes on for the others and its value is
// kept. A load is bounded by the Pipeline's deadline or per-attempt timeout, or by
// Options.LoadTimeout, or, with neither, by [DefaultLoadTimeout] (10 s): an origin that
// hangs holds one goroutine per key for that long, never one per caller. [Cache.Close]
// waits for the loads under way.
//
// # Panics
//
// A panic in Load — or in a stage or observer of the Pipeline, on the load's goroutine —
// never ends the process: it is recovered and becomes the load's error, a
// *policy.PanicError carrying the panic's value and stack, which every caller waiting for
// that load receives (errors.As finds it). It is reported as a event.Panic (Source
// [PanicSource]) to Options.Observer and counted in Stats.Panics, and it is a failed load
// like any other: remembered for NegativeTTL, with the last good value served over it
// within StaleIfError. Recovered inside the pipeline, it is a failed attempt to the
// pipeline's stages: a breaker counts it, a retry does not retry it. A runtime.Goexit in
// Load ends the load with an error too.
package coalesce
