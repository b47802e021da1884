// Package callpath is what one call carries down its path. It travels in the
// call's context, and across processes in its headers. It says:
//   - which retry owns the call path, and on which attempt ([WithAttempt],
//     [Owned], [Attempt], [Outgoing]);
//   - whether the work may be repeated ([WithoutRepeats]);
//   - the race of a hedge's concurrent attempts ([WithRace], [Win]);
//   - the cancel functions that must outlive the call ([WithReleaser],
//     [DeferRelease]);
//   - the server slot a waiting call gives back ([WithPauser], [Pause]).
//
// Package policy runs pipelines. Their stages speak callpath to one another, and
// so do the transports that carry calls between processes. Stages (retry,
// deadline, shed) and transports (policyhttp, policygrpc) use it. An application
// rarely needs more than [Owned], for a loop of its own.
//
// # One retry owner per call path
//
// A retry that owns the call path marks each attempt's context with
// [WithAttempt]. A retry below it sees [Owned] and makes exactly one attempt.
// Across processes, a transport sends [Outgoing]'s number as [HeaderAttempt]. gRPC
// sends the same number as metadata. Server middleware reads that header with
// [ParseAttempt], and Envoy's and gRPC's own too. It marks the handler's context
// with [WithUpstreamAttempt], so the handler's own retries fail fast too. The
// headers come from an untrusted client. They can lower a request's priority,
// never raise it.
//
// # Refusals between processes
//
// A Backstop server's shedder sends [HeaderRefused] on every refusal. It also
// sends [HeaderRetryAfterMillis], finer than Retry-After's seconds. So the
// caller's breaker and budget do not count a server protecting itself as a
// failure of its dependency.
//
// # Why refusals are not failures
//
// Take a call path of several services, each with a breaker. When a dependency at
// its end fails, each server's breaker may protect it. Counted as failures, those
// refusals would open every breaker on the path. The breakers would then reclose
// one after another. A server that sends [HeaderRefused] without cause gains
// nothing. It only keeps its callers' breakers and budgets from counting its own
// failures.
//
// # Pausing during backoff
//
// A server's shedder caps the work it runs at once. A retry owner in a handler
// sleeps between attempts. While a dependency is down, those sleeps would fill the
// server's limit. The server would refuse new work it could serve. It would keep
// refusing until the sleeps end, after the dependency has returned. So a [Pauser]
// gives the slot back for each sleep.
//
// # Cost
//
// Everything here is safe for concurrent use. The context values cost one
// allocation at most. The first 16 attempts of a bare context.Background() cost
// none.
package callpath
