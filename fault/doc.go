// Package fault is how code tells Backstop's stages what an error means: worth retrying
// ([Retryable]), after a server's hint ([After], gRPC's exact [Pushback]), a refusal by
// a server protecting itself ([Refused]), never to be retried ([Permanent]), or the
// caller's own fault, which says nothing about the dependency's health ([Client]).
//
// The marks wrap an error without hiding it: errors.Is and errors.As see through them,
// they are found through any wrapping the caller adds, and each is nil in, nil out. A
// transport marks what it learns from the wire (policyhttp from status codes and
// Retry-After, policygrpc from status codes and pushback); the retry reads the marks to
// decide ([Of]), the breaker to leave client faults out of its counts.
//
// Refusals by a policy on the call path — an open breaker, a request shed — are not
// marks: they match policy.ErrRejected and implement policy.Rejection.
package fault
