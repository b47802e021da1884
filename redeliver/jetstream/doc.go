// Package jetstream applies redeliver's decisions to NATS JetStream messages: a
// handler wrapper that reads the delivery count from the message's metadata, acks a
// success, negatively acknowledges a retryable failure with the decided delay
// (NakWithDelay), and dead-letters the rest — publishes the message, with headers that
// tell its history, to a dead-letter subject, then terminates it.
//
// The consumer's MaxDeliver must be unlimited (-1) or larger than the policy's
// MaxDeliveries, and its AckWait longer than a handler runs, so that JetStream neither
// gives up nor redelivers before the policy decides.
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
