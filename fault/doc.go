// Package fault is how code tells Backstop's stages what an error means. An error
// may be:
//   - worth retrying ([Retryable]);
//   - worth retrying after a server's hint ([After], gRPC's exact [Pushback]);
//   - a refusal by a server protecting itself ([Refused]);
//   - never to be retried ([Permanent]);
//   - the caller's own fault, which says nothing about the dependency's health
//     ([Client]).
//
// The marks wrap an error without hiding it. errors.Is and errors.As see through
// them. They are found through any wrapping the caller adds. Each is nil in, nil
// out. A transport marks what it learns from the wire. Package policyhttp reads
// status codes and Retry-After; policygrpc reads status codes and pushback. The
// retry reads the marks to decide ([Of]). The breaker reads them to leave client
// faults out of its counts.
//
// Refusals by a policy on the call path are not marks: an open breaker, a request
// shed. They match policy.ErrRejected and are a *policy.RejectError.
//
// # Hints and spread
//
// A server may tell its callers when to come back. Every client refused in the
// same second is then told the same hint. Waiting exactly that long would bring
// them back together. So the retry adds a random spread to an [After] hint. A
// [Refused] hint gets twice the spread. A gRPC [Pushback] is waited exactly, as
// gRFC A6 says.
//
// # Refusals and budgets
//
// A refused attempt did no work at the dependency a budget guards. The server's own
// breaker counts that dependency's failures. So the retry does not report a
// [Refused] failure to a budget outside it.
package fault
