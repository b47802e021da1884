// Package coalesce is a cache in front of a dependency that never stampedes: when a
// hot key expires, one request rebuilds the value while the others wait for it
// (single flight, golang.org/x/sync/singleflight), the stale value is served while it
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
package coalesce
