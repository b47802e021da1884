package sqs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/backstop-go/backstop/clock"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/backstop-go/backstop/redeliver"
)

// Attributes of a dead-lettered message (SQS message attributes, type String).
const (
	AttributeError      = "Backstop-Error"      // the last receive's error text
	AttributeReason     = "Backstop-Reason"     // redeliver.ReasonPermanent or ReasonExhausted
	AttributeDeliveries = "Backstop-Deliveries" // how many times it was received
	AttributeFirstSeen  = "Backstop-First-Receive"
	AttributeMessageID  = "Backstop-Message-Id" // its id in the source queue
	// AttributeDeadLetter holds the five above as one JSON object ("error", "reason",
	// "deliveries", "first_receive", "message_id") when the message's own attributes
	// leave too few of SQS's 10 for them; with all 10 taken, the dead letter carries
	// the message's own attributes only.
	AttributeDeadLetter = "Backstop-Dead-Letter"
)

// MaxAttributes is the most message attributes SQS lets a message carry.
const MaxAttributes = 10

// maxErrorText bounds the error text a dead letter carries, in bytes: a message's
// attributes count towards SQS's limit on its size.
const maxErrorText = 4096

// Defaults for zero Options fields.
const (
	DefaultWaitTime    = 20 * time.Second // the longest long poll SQS allows
	DefaultMaxMessages = 10               // the most one ReceiveMessage returns
)

// LimitMargin is what the Consumer keeps below SQS's limit of 12 hours from the
// receive when it sets a visibility timeout: a minute, for the request's time on the
// way and the SDK's own retries of it, and for the receive's moment being known only
// from this side.
const LimitMargin = time.Minute

// API is what the Consumer uses of *sqs.Client.
type API interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Handler processes one message; its error decides the message's fate.
type Handler func(ctx context.Context, m types.Message) error

// Stats count what the Consumer did. Shortened counts the retries whose delay was cut
// to the time left of SQS's 12 hours from the receive (they are counted in Retried
// too).
type Stats struct {
	Deliveries, Deleted, Retried, DeadLettered, Shortened uint64
}

// Options configure [New]. QueueURL and DeadLetterURL are required.
type Options struct {
	QueueURL      string
	DeadLetterURL string
	// WaitTime is Run's long poll; 0 means DefaultWaitTime (20 s).
	WaitTime time.Duration
	// MaxMessages is how many messages Run asks for at once, 1 to 10; 0 means
	// DefaultMaxMessages (10).
	MaxMessages int
	// OnDecide, if set, is called with every decision, after it is applied; a retry's
	// Delay is the visibility timeout asked of SQS, which may be shorter than the
	// Schedule's (see the package doc).
	OnDecide func(m types.Message, receives int, d redeliver.Decision)
	// Clock reads the time the 12 hours from a receive are counted on; nil means the
	// system clock.
	Clock clock.Clock
}

// Consumer wraps a Handler with a redeliver.Schedule. It is safe for concurrent use.
// Build it with [New].
type Consumer struct {
	api API
	p   *redeliver.Schedule
	h   Handler
	o   Options
	clk clock.Clock

	deliveries, deleted, retried, dead, shortened atomic.Uint64
}

// New returns a Consumer of o.QueueURL that runs h under p and dead-letters to
// o.DeadLetterURL, or an error naming the bad input.
func New(api API, p *redeliver.Schedule, h Handler, o Options) (*Consumer, error) {
	switch {
	case api == nil:
		return nil, errors.New("redeliver/sqs: the API is nil")
	case p == nil:
		return nil, errors.New("redeliver/sqs: the Schedule is nil")
	case h == nil:
		return nil, errors.New("redeliver/sqs: the Handler is nil")
	case o.QueueURL == "":
		return nil, errors.New("redeliver/sqs: Options.QueueURL is empty; want the queue's URL")
	case o.DeadLetterURL == "":
		return nil, errors.New("redeliver/sqs: Options.DeadLetterURL is empty; want the dead-letter queue's URL")
	case o.WaitTime < 0 || o.WaitTime > DefaultWaitTime:
		return nil, fmt.Errorf("redeliver/sqs: Options.WaitTime is %v; want 0 to 20s", o.WaitTime)
	case o.MaxMessages < 0 || o.MaxMessages > DefaultMaxMessages:
		return nil, fmt.Errorf("redeliver/sqs: Options.MaxMessages is %d; want 1 to 10, or 0 for the default", o.MaxMessages)
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	if o.MaxMessages == 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	return &Consumer{api: api, p: p, h: h, o: o, clk: clock.Or(o.Clock)}, nil
}

// Stats returns the counts so far.
func (c *Consumer) Stats() Stats {
	return Stats{Deliveries: c.deliveries.Load(), Deleted: c.deleted.Load(), Retried: c.retried.Load(), DeadLettered: c.dead.Load(),
		Shortened: c.shortened.Load()}
}

// Run receives messages and processes them one by one until ctx ends; it returns
// ctx's error, or the error of a receive. An error applying one message's decision
// does not stop it: that message becomes visible again and is received again.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		received := c.clk.Now() // SQS receives after this: its 12 hours end later
		out, err := c.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(c.o.QueueURL),
			MaxNumberOfMessages: int32(c.o.MaxMessages),
			WaitTimeSeconds:     int32(c.o.WaitTime / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount,
				types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp, types.MessageSystemAttributeNameMessageGroupId},
			MessageAttributeNames: []string{"All"},
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("redeliver/sqs: receiving from %s: %w", c.o.QueueURL, err)
		}
		for _, m := range out.Messages {
			_ = c.ProcessReceived(ctx, m, received)
		}
	}
}

// Process runs the Handler on one received message and applies the policy's
// decision. It returns the error of applying it (a delete, a visibility change, the
// dead-letter send); the message then becomes visible again when its visibility
// timeout ends, so nothing is lost. The message must have been received with the
// ApproximateReceiveCount system attribute.
//
// Process counts SQS's 12 hours from its own start; a message that waited after its
// receive (the rest of a batch) is better processed with [Consumer.ProcessReceived].
func (c *Consumer) Process(ctx context.Context, m types.Message) error {
	return c.ProcessReceived(ctx, m, c.clk.Now())
}

// ProcessReceived is [Consumer.Process] for a message received at received (by
// Options.Clock; a moment before the ReceiveMessage request was sent is safe): a
// retry's visibility timeout ends at most 12 hours, less [LimitMargin], after it.
func (c *Consumer) ProcessReceived(ctx context.Context, m types.Message, received time.Time) error {
	c.deliveries.Add(1)
	n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || n < 1 {
		return fmt.Errorf("redeliver/sqs: message %s has no ApproximateReceiveCount; receive with that system attribute", aws.ToString(m.MessageId))
	}
	herr := c.h(ctx, m)
	d := c.p.Decide(n, herr)
	switch {
	case !d.Retry && !d.DeadLetter:
		err = c.delete(ctx, m)
		if err == nil {
			c.deleted.Add(1)
		}
	case d.Retry:
		secs, cut := visibility(d.Delay, c.clk.Now().Sub(received))
		d.Delay = time.Duration(secs) * time.Second
		_, err = c.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(c.o.QueueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: secs})
		if err == nil {
			c.retried.Add(1)
			if cut {
				c.shortened.Add(1)
			}
		} else {
			err = fmt.Errorf("redeliver/sqs: delaying message %s: %w", aws.ToString(m.MessageId), err)
		}
	default:
		err = c.deadLetter(ctx, m, n, herr, d)
	}
	if c.o.OnDecide != nil {
		c.o.OnDecide(m, n, d)
	}
	return err
}

// deadLetterAttributes returns the attributes of m's dead letter: m's own, and what
// Backstop tells of its end — each in an attribute of its own when they fit in SQS's
// MaxAttributes, else together in AttributeDeadLetter, else (m has all 10) none.
func deadLetterAttributes(m types.Message, n int, herr error, d redeliver.Decision) map[string]types.MessageAttributeValue {
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	text := herr.Error()
	if len(text) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	ours := []struct{ name, json, value string }{
		{AttributeError, "error", text},
		{AttributeReason, "reason", d.Reason},
		{AttributeDeliveries, "deliveries", strconv.Itoa(n)},
		{AttributeMessageID, "message_id", aws.ToString(m.MessageId)},
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)], 10, 64); err == nil {
		ours = append(ours, struct{ name, json, value string }{AttributeFirstSeen, "first_receive", time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)})
	}
	attrs := make(map[string]types.MessageAttributeValue, MaxAttributes)
	for k, v := range m.MessageAttributes {
		attrs[k] = v
	}
	added := 0
	for _, a := range ours {
		if _, ok := attrs[a.name]; !ok {
			added++
		}
	}
	_, again := attrs[AttributeDeadLetter] // a dead letter dead-lettered again
	switch {
	case len(attrs)+added <= MaxAttributes:
		for _, a := range ours {
			attrs[a.name] = str(a.value)
		}
	case len(attrs) < MaxAttributes || again:
		all := make(map[string]string, len(ours))
		for _, a := range ours {
			all[a.json] = a.value
		}
		b, _ := json.Marshal(all)
		attrs[AttributeDeadLetter] = str(string(b))
	}
	return attrs
}

// visibility returns the visibility timeout, in whole seconds, that hides a message
// received held ago for delay, or as long as SQS allows: at most the time left of its
// 12 hours from the receive, less LimitMargin (0, visible at once, when none is
// left). cut says whether that is shorter than delay.
func visibility(delay, held time.Duration) (secs int32, cut bool) {
	want := min(math.Ceil(delay.Seconds()), redeliver.SQSMaxDelay.Seconds())
	left := math.Floor((redeliver.SQSMaxDelay - LimitMargin - held).Seconds())
	if want <= left {
		return int32(want), false
	}
	return int32(max(0, left)), true
}

func (c *Consumer) delete(ctx context.Context, m types.Message) error {
	if _, err := c.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.o.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("redeliver/sqs: deleting message %s: %w", aws.ToString(m.MessageId), err)
	}
	return nil
}

func (c *Consumer) deadLetter(ctx context.Context, m types.Message, n int, herr error, d redeliver.Decision) error {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(c.o.DeadLetterURL), MessageBody: m.Body,
		MessageAttributes: deadLetterAttributes(m, n, herr, d)}
	if strings.HasSuffix(c.o.DeadLetterURL, ".fifo") {
		// A FIFO queue takes a message only with a group: the message's own (from a
		// FIFO source queue), or else its id; its id also deduplicates a send repeated
		// after a failure.
		group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		in.MessageGroupId = aws.String(cmp.Or(group, aws.ToString(m.MessageId)))
		in.MessageDeduplicationId = m.MessageId
	}
	if _, err := c.api.SendMessage(ctx, in); err != nil {
		// Left as it is: visible again after its visibility timeout, and dead-lettered then.
		return fmt.Errorf("redeliver/sqs: sending message %s to the dead-letter queue: %w", aws.ToString(m.MessageId), err)
	}
	c.dead.Add(1)
	return c.delete(ctx, m)
}
