// Package jetstream applies redeliver's decisions to NATS JetStream messages: a
// handler wrapper that reads the delivery count from the message's metadata, acks a
// success, negatively acknowledges a retryable failure with the decided delay
// (NakWithDelay), and dead-letters the rest — publishes the message, with headers that
// tell its history, to a dead-letter subject, then terminates it.
//
// The consumer's MaxDeliver must be unlimited (-1) or larger than the policy's
// MaxDeliveries, and its AckWait longer than a handler runs, so that JetStream neither
// gives up nor redelivers before the policy decides: a MaxDeliver at or below
// MaxDeliveries stops the deliveries before the last one dead-letters the message, and
// a handler that runs past AckWait sees the message delivered again while it runs (the
// Consumer does not call InProgress). Leave the consumer's BackOff unset: it replaces
// AckWait for deliveries not acknowledged in time (not for naks), and the delays are
// the policy's.
//
// The dead letter keeps the message's headers; those NATS acts on (Nats-Expected-…,
// Nats-Msg-Id, Nats-Rollup, Nats-TTL, every Nats-…) are kept under Backstop-Orig-…,
// so that they are not conditions or instructions for the dead-letter stream. When the
// dead-letter publish fails, the message is negatively acknowledged for
// Options.DeadLetterRetry and dead-lettered at its next delivery to the same Consumer,
// without running the Handler again.
//
// # Panics
//
// [Consumer.Handle] runs on the NATS client's goroutine, where no caller could recover a
// panic: a panic in the Handler there is recovered and becomes the delivery's error, a
// *policy.PanicError with the panic's value and stack, decided like any other failure
// (redelivered after its delay, dead-lettered after MaxDeliveries), and reported as a
// event.Panic (Source [PanicSource]) to Options.Observer. [Consumer.Process] runs
// on its caller's goroutine, where a panic propagates unchanged (the message, neither
// acked nor naked, is redelivered after AckWait).
package jetstream
