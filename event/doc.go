// Package event is what the stages of a pipeline report, and who listens. A stage
// reports an [Event] per call, attempt, retry scheduled or suppressed, breaker
// transition, deadline exceeded, request shed, fleet fallback, recovered panic, failure
// a fallback answered, and a stage's refusal or wait. It goes to an [Observer] set on
// the pipeline (policy.Observe).
//
// Observers that care for a few kinds say so with a Needs method ([Observer], [Needs]).
// Stages then do no work at all for the rest, not even a clock reading. Package metrics
// (Prometheus) and the policyotel module (OpenTelemetry) are observers. [ObserverFunc]
// makes one of a function, and [Observers] sends to several.
//
// Every field of an Event that may become a metrics label holds a value from a small
// closed set, never error text or a URL.
package event
