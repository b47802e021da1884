// Package callpath is what one call carries down its path, in its context and across
// processes in its headers: which retry owns the call path and on which attempt
// ([WithAttempt], [Owned], [Attempt], [Outgoing]), whether the work may be repeated
// ([WithoutRepeats]), the race of a hedge's concurrent attempts ([WithRace], [Win]),
// the cancel functions that must outlive the call ([WithReleaser], [DeferRelease]) and
// the server slot a waiting call gives back ([WithPauser], [Pause]).
//
// Package policy runs pipelines; callpath is the protocol their stages and the
// transports that carry calls between processes speak to one another. Stages (retry,
// deadline, shed) and transports (policyhttp, policygrpc) use it; an application
// rarely needs more than [Owned], for a loop of its own.
//
// # One retry owner per call path
//
// A retry that owns the call path marks each attempt's context with [WithAttempt]; a
// retry below it sees [Owned] and makes exactly one attempt. Across processes, a
// transport sends [Outgoing]'s number as [HeaderAttempt] (gRPC: the same number as
// metadata); server middleware reads that header — and Envoy's and gRPC's own — with
// [ParseAttempt] and marks the handler's context with [WithUpstreamAttempt], so the
// handler's own retries fail fast too. The headers come from an untrusted client: they
// can lower a request's priority, never raise it.
//
// # Refusals between processes
//
// A Backstop server's shedder sends [HeaderRefused] (and, finer than Retry-After's
// seconds, [HeaderRetryAfterMillis]) on every refusal, so the caller's breaker and
// budget do not count a server protecting itself as a failure of its dependency.
//
// Everything here is safe for concurrent use; the context values cost one allocation
// at most (none for the first 16 attempts of a bare context.Background()).
package callpath
