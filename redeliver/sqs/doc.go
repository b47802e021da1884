// Package sqs applies redeliver's decisions to Amazon SQS messages: a handler wrapper
// that reads the receive count (ApproximateReceiveCount), deletes a message whose
// handler succeeded, makes a retryable failure visible again after the decided delay
// (ChangeMessageVisibility: SQS's own visibility timeout is a fixed delay, so the
// growing one is set message by message), and dead-letters the rest — sends the
// message, with attributes that tell its history, to a dead-letter queue, then deletes
// it.
//
// Build the Schedule with MaxDelay redeliver.SQSMaxDelay (12 h, the longest SQS hides a
// message); a longer delay is cut to it.
//
// # The 12-hour limit counts from the receive
//
// SQS refuses a visibility timeout that would keep a message hidden longer than 12
// hours after it was received (ChangeMessageVisibility: "If you attempt to set the
// VisibilityTimeout to an amount more than the maximum time left, Amazon SQS returns
// an error"); the time the handler ran is spent from those 12 hours. The Consumer
// therefore asks for at most the time left since the receive, less [LimitMargin],
// and the Decision it hands to Options.OnDecide carries the delay it asked for, so a
// long delay is honoured as far as SQS allows (Stats.Shortened counts the delays so
// cut). [Consumer.Run] counts from the moment before its ReceiveMessage request;
// [Consumer.ProcessReceived] takes that moment from the caller, and
// [Consumer.Process] counts from its own start.
//
// A queue's own redrive policy may stay as a
// safety net if its maxReceiveCount is above the Schedule's MaxDeliveries; below it,
// SQS would move messages before the Schedule decides.
//
// The adapter is tested against a fake of SQS's JSON protocol (AWS JSON 1.0) served
// on 127.0.0.1 by the tests, not a real SQS: no SQS-compatible server that speaks the
// protocol of current aws-sdk-go-v2 clients and counts receives runs here.
package sqs
