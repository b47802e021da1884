// Package redeliver decides what a queue consumer or background worker does with a
// message or job that failed. It either redelivers it after a growing, jittered delay
// worked out from its delivery count, or sends it to a dead-letter queue. A permanent
// error dead-letters at once; other errors do so after MaxDeliveries. Queues give no
// exponential backoff of their own: an SQS visibility timeout and a JetStream
// redelivery are fixed. The consumer must ask for each delay, and this package says
// which.
//
// It is pure logic, with no broker: adapters (redeliver/jetstream, redeliver/sqs) apply
// its [Decision]s. It is deterministic given its random source.
//
// # Defaults
//
// Jobs can wait far longer than interactive calls, so the defaults are job-sized:
//
//	| setting       | default | meaning                                             |
//	|---------------|---------|-----------------------------------------------------|
//	| Base          | 10 s    | the first redelivery's backoff window               |
//	| Cap           | 15 min  | no redelivery waits longer (before a server's hint) |
//	| Strategy      | Full    | uniform in [0, min(Cap, Base·2^(n−1))), as retry    |
//	| MaxDeliveries | 5       | the fifth failed delivery dead-letters the message  |
//	| MaxDelay      | none    | SQSMaxDelay (12 h) when the target is SQS           |
//
// Package retry retries only the errors on its allow-list, which suits interactive
// calls. A job is retried whatever its error, unless the error is marked
// fault.Permanent (or Options.ShouldRetry says no). A job that fails for an unknown
// reason is worth another try later. A fault.After or fault.Pushback hint sets the
// least delay.
package redeliver
