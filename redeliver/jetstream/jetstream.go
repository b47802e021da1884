package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/redeliver"
)

// PanicSource is the Source of the event.Panic a Consumer reports.
const PanicSource = "redeliver/jetstream"

// Headers of a dead-lettered message.
const (
	HeaderError         = "Backstop-Error"          // the last delivery's error text
	HeaderReason        = "Backstop-Reason"         // redeliver.ReasonPermanent or ReasonExhausted
	HeaderDeliveries    = "Backstop-Deliveries"     // how many times it was delivered
	HeaderFirstDelivery = "Backstop-First-Delivery" // when it was stored in the stream (RFC 3339)
	HeaderLastDelivery  = "Backstop-Last-Delivery"  // when it was last delivered (RFC 3339)
	HeaderOrigSubject   = "Backstop-Subject"        // the subject it was published on
	// HeaderOrigPrefix prefixes the message's own headers that NATS acts on (Nats-…:
	// Nats-Expected-Stream, Nats-Msg-Id, Nats-Rollup, Nats-TTL…), kept under
	// Backstop-Orig-Nats-…: published as they are, they would be conditions and
	// instructions for the dead-letter stream, which refuses or acts on them.
	HeaderOrigPrefix = "Backstop-Orig-"
)

// DefaultDeadLetterRetry is Options.DeadLetterRetry's default.
const DefaultDeadLetterRetry = time.Second

// Handler processes one message's payload; its error decides the message's fate.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Stats count what the Consumer did.
type Stats struct {
	Deliveries, Acked, Retried, DeadLettered uint64
}

// Consumer wraps a Handler with a redeliver.Schedule.
//
// A Consumer is safe for concurrent use. Build it with [New].
type Consumer struct {
	js       jetstream.JetStream
	p        *redeliver.Schedule
	dlq      string
	h        Handler
	now      func() time.Time
	onDecide func(msg jetstream.Msg, deliveries int, d redeliver.Decision)
	obs      event.Observer

	// deadLetterRetry is how long a message whose dead-letter publish failed waits to
	// be redelivered; pending holds, by stream sequence, the decision to dead-letter
	// such messages, so that their next delivery here is dead-lettered without
	// running the Handler again.
	deadLetterRetry time.Duration
	pending         sync.Map // uint64 → pendingDead

	deliveries, acked, retried, dead atomic.Uint64
}

// pendingDead is a dead-letter decision whose publish failed.
type pendingDead struct {
	err string
	d   redeliver.Decision
}

// Options configure [New]. DeadLetter is required.
type Options struct {
	// DeadLetter is the subject dead-lettered messages are published on; a stream
	// must capture it for them to be kept.
	DeadLetter string
	// OnDecide, if set, is called with every decision, after it is applied (for logs,
	// metrics and tests).
	OnDecide func(msg jetstream.Msg, deliveries int, d redeliver.Decision)
	// Observer, if set, hears a event.Panic for each panic of the Handler that
	// Handle recovered.
	Observer event.Observer
	// DeadLetterRetry is how long a message waits to be redelivered when publishing it
	// to the dead-letter subject failed; its next delivery to this Consumer is
	// dead-lettered without running the Handler again. 0 means
	// DefaultDeadLetterRetry (1 s).
	DeadLetterRetry time.Duration
}

// New returns a Consumer that runs h under p and dead-letters to o.DeadLetter.
func New(js jetstream.JetStream, p *redeliver.Schedule, h Handler, o Options) (*Consumer, error) {
	switch {
	case js == nil:
		return nil, fmt.Errorf("redeliver/jetstream: the JetStream is nil")
	case p == nil:
		return nil, fmt.Errorf("redeliver/jetstream: the Schedule is nil")
	case h == nil:
		return nil, fmt.Errorf("redeliver/jetstream: the Handler is nil")
	case o.DeadLetter == "":
		return nil, fmt.Errorf("redeliver/jetstream: Options.DeadLetter is empty; want the dead-letter subject")
	case o.DeadLetterRetry < 0:
		return nil, fmt.Errorf("redeliver/jetstream: Options.DeadLetterRetry is %v; want > 0, or 0 for the default %v", o.DeadLetterRetry, DefaultDeadLetterRetry)
	}
	return &Consumer{js: js, p: p, dlq: o.DeadLetter, h: h, now: time.Now, onDecide: o.OnDecide, obs: o.Observer,
		deadLetterRetry: cmp.Or(o.DeadLetterRetry, DefaultDeadLetterRetry)}, nil
}

// Stats returns the counts so far.
func (c *Consumer) Stats() Stats {
	return Stats{Deliveries: c.deliveries.Load(), Acked: c.acked.Load(), Retried: c.retried.Load(), DeadLettered: c.dead.Load()}
}

// Handle processes one delivery: it runs the Handler and applies the policy's
// decision. Use it as a jetstream.MessageHandler with consumer.Consume. A panic in the
// Handler is the delivery's failure (see the package documentation).
func (c *Consumer) Handle(msg jetstream.Msg) {
	_ = c.process(context.Background(), msg, true)
}

// Process is Handle with a context and the error of applying the decision (an ack, a
// nak or the dead-letter publish that failed); the message is then redelivered by
// JetStream after AckWait, so nothing is lost. A panic in the Handler propagates.
func (c *Consumer) Process(ctx context.Context, msg jetstream.Msg) error {
	return c.process(ctx, msg, false)
}

// process is Process; with contain, a panic in the Handler is the delivery's error.
func (c *Consumer) process(ctx context.Context, msg jetstream.Msg, contain bool) error {
	c.deliveries.Add(1)
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("redeliver/jetstream: reading the delivery count: %w", err)
	}
	n := int(meta.NumDelivered)
	var herr error
	var d redeliver.Decision
	if v, ok := c.pending.Load(meta.Sequence.Stream); ok {
		// Its dead-letter publish failed: publish it again, without another run.
		pd := v.(pendingDead)
		herr, d = errors.New(pd.err), pd.d
	} else {
		herr = c.handle(ctx, msg, contain)
		d = c.p.Decide(n, herr)
	}
	switch {
	case !d.Retry && !d.DeadLetter:
		err = msg.Ack()
		c.acked.Add(1)
	case d.Retry:
		err = msg.NakWithDelay(d.Delay)
		c.retried.Add(1)
	default:
		err = c.deadLetter(ctx, msg, meta, n, herr, d)
	}
	if c.onDecide != nil {
		c.onDecide(msg, n, d)
	}
	return err
}

func (c *Consumer) deadLetter(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, n int, herr error, d redeliver.Decision) error {
	out := nats.NewMsg(c.dlq)
	out.Data = msg.Data()
	for k, vs := range msg.Headers() {
		if strings.HasPrefix(k, "Nats-") {
			k = HeaderOrigPrefix + k
		}
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	out.Header.Set(HeaderError, herr.Error())
	out.Header.Set(HeaderReason, d.Reason)
	out.Header.Set(HeaderDeliveries, strconv.Itoa(n))
	out.Header.Set(HeaderFirstDelivery, meta.Timestamp.UTC().Format(time.RFC3339Nano))
	out.Header.Set(HeaderLastDelivery, c.now().UTC().Format(time.RFC3339Nano))
	out.Header.Set(HeaderOrigSubject, msg.Subject())
	if _, err := c.js.PublishMsg(ctx, out); err != nil {
		// Keep it: its next delivery is dead-lettered, after a pause, not run again.
		c.pending.Store(meta.Sequence.Stream, pendingDead{err: herr.Error(), d: d})
		_ = msg.NakWithDelay(c.deadLetterRetry)
		return fmt.Errorf("redeliver/jetstream: publishing to the dead-letter subject %s: %w", c.dlq, err)
	}
	c.pending.Delete(meta.Sequence.Stream)
	c.dead.Add(1)
	return msg.Term()
}

// handle runs the Handler; with contain, a panic becomes its error and is reported.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg, contain bool) (err error) {
	if contain {
		defer func() {
			if v := recover(); v != nil {
				pe := policy.NewPanicError(v)
				if c.obs != nil {
					c.obs.Observe(event.Event{Kind: event.Panic, Source: PanicSource, Time: c.now(), Err: pe, Context: ctx})
				}
				err = pe
			}
		}()
	}
	return c.h(ctx, msg)
}
