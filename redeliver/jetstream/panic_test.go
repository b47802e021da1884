package jetstream_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/redeliver"
	rjs "github.com/backstop-go/backstop/redeliver/jetstream"
	"github.com/backstop-go/backstop/retry"
)

func explodingJob(context.Context, jetstream.Msg) error { panic("job exploded") }

// TestHandle_APanickingHandlerIsAFailedDelivery: a Handler that panics on the NATS
// client's goroutine (consumer.Consume) does not end the process: each panic is a failed
// delivery, redelivered after its delay and dead-lettered after MaxDeliveries, with an
// EventPanic for each.
func TestHandle_APanickingHandlerIsAFailedDelivery(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-p")
	var mu sync.Mutex
	var decisions []redeliver.Decision
	var panics []event.Event
	finished := make(chan struct{})
	c, err := rjs.New(b.js, policy.Must(redeliver.New(redeliver.Options{Base: 10 * time.Millisecond, MaxDeliveries: 2, Strategy: retry.None{}})),
		explodingJob, rjs.Options{DeadLetter: "dlq.jobs",
			Observer: event.ObserverFunc(func(e event.Event) {
				mu.Lock()
				defer mu.Unlock()
				panics = append(panics, e)
			}),
			OnDecide: func(_ jetstream.Msg, _ int, d redeliver.Decision) {
				mu.Lock()
				defer mu.Unlock()
				if decisions = append(decisions, d); d.DeadLetter {
					close(finished)
				}
			}})
	require.NoError(t, err)
	cc, err := b.cons.Consume(c.Handle)
	require.NoError(t, err)
	defer cc.Stop()
	select {
	case <-finished:
	case <-time.After(20 * time.Second): // a bound on a broken test, not a timing
		t.Fatal("the message was never dead-lettered")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, decisions, 2, "deliveries of a message whose handler panics, MaxDeliveries 2")
	require.True(t, decisions[0].Retry, "the first panic is retried: %+v", decisions[0])
	require.Equal(t, redeliver.ReasonExhausted, decisions[1].Reason)
	require.Len(t, panics, 2, "EventPanic events")
	for _, e := range panics {
		require.Equal(t, event.Panic, e.Kind)
		require.Equal(t, rjs.PanicSource, e.Source)
		var pe *policy.PanicError
		require.ErrorAs(t, e.Err, &pe)
		require.Equal(t, "job exploded", pe.Value)
		require.Contains(t, string(pe.Stack), "explodingJob", "the stack names the panicking handler")
	}
	dead := readDLQ(t, b)
	require.Equal(t, "job-p", string(dead.Data()))
	require.True(t, strings.HasPrefix(dead.Headers().Get(rjs.HeaderError), "panic: job exploded"),
		"%s = %q; want the panic", rjs.HeaderError, dead.Headers().Get(rjs.HeaderError))
}

// TestProcess_APanicOnTheCallersGoroutinePropagates: Process runs on its caller's
// goroutine, so a panic in the Handler is the caller's own.
func TestProcess_APanicOnTheCallersGoroutinePropagates(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-q")
	c, err := rjs.New(b.js, policy.Must(redeliver.New(redeliver.Options{})), explodingJob, rjs.Options{DeadLetter: "dlq.jobs"})
	require.NoError(t, err)
	batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	require.NotNil(t, msg, "a message fetched")
	require.PanicsWithValue(t, "job exploded", func() { _ = c.Process(context.Background(), msg) })
	require.Equal(t, rjs.Stats{Deliveries: 1}, c.Stats(), "nothing decided: the message waits for AckWait")
}
