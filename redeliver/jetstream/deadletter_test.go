package jetstream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/redeliver"
	rjs "github.com/backstop-go/backstop/redeliver/jetstream"
)

// TestDeadLetter_NATSHeadersAreKeptAsOriginals: a message published with headers
// NATS acts on (an expected-stream condition, a message id) is dead-lettered with
// them under Backstop-Orig-…; published as they were, the dead-letter stream refused
// it ("expected stream does not match") and the Handler ran again at once, for ever.
func TestDeadLetter_NATSHeadersAreKeptAsOriginals(t *testing.T) {
	b := newBroker(t)
	msg := nats.NewMsg("jobs.email")
	msg.Data = []byte("job-9")
	msg.Header.Set(jetstream.ExpectedStreamHeader, "JOBS")
	msg.Header.Set(jetstream.MsgIDHeader, "job-9")
	_, err := b.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	p := policy.Must(redeliver.New(redeliver.Options{Base: 10 * time.Millisecond}))
	var runs atomic.Int64
	ds := run(t, b, p, func(int) error { runs.Add(1); return fault.Permanent(errJob) }, func(ds []delivery) bool { return lastDecision(ds).DeadLetter })
	require.Len(t, ds, 1)
	require.Equal(t, int64(1), runs.Load(), "the Handler ran once")
	h := readDLQ(t, b).Headers()
	require.Equal(t, "JOBS", h.Get(rjs.HeaderOrigPrefix+jetstream.ExpectedStreamHeader))
	require.Equal(t, "job-9", h.Get(rjs.HeaderOrigPrefix+jetstream.MsgIDHeader))
	require.Empty(t, h.Get(jetstream.ExpectedStreamHeader), "not a condition on the dead-letter publish")
}

// TestDeadLetter_AFailedPublishIsRetriedWithoutRunningTheHandler: when publishing to
// the dead-letter subject fails (no stream captures it yet), the message comes back
// after DeadLetterRetry and is dead-lettered then, the Handler not run again.
func TestDeadLetter_AFailedPublishIsRetriedWithoutRunningTheHandler(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-10")
	var runs atomic.Int64
	var mu sync.Mutex
	var decisions []redeliver.Decision
	decided := make(chan struct{}, 16)
	c, err := rjs.New(b.js, policy.Must(redeliver.New(redeliver.Options{Base: 10 * time.Millisecond})),
		func(context.Context, jetstream.Msg) error { runs.Add(1); return fault.Permanent(errJob) },
		rjs.Options{DeadLetter: "later.jobs", DeadLetterRetry: 20 * time.Millisecond,
			OnDecide: func(_ jetstream.Msg, _ int, d redeliver.Decision) {
				mu.Lock()
				decisions = append(decisions, d)
				mu.Unlock()
				decided <- struct{}{}
			}})
	require.NoError(t, err)
	ctx := context.Background()
	batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.ErrorContains(t, c.Process(ctx, m), "publishing to the dead-letter subject later.jobs")
	}
	<-decided
	// A stream for the dead-letter subject now exists.
	_, err = b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "LATER", Subjects: []string{"later.>"}})
	require.NoError(t, err)
	batch, err = b.cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, c.Process(ctx, m))
	}
	<-decided
	require.Equal(t, int64(1), runs.Load(), "the Handler ran once")
	require.Equal(t, rjs.Stats{Deliveries: 2, DeadLettered: 1}, c.Stats())
	mu.Lock()
	require.Equal(t, redeliver.ReasonPermanent, decisions[1].Reason)
	mu.Unlock()
	later, err := b.js.Stream(ctx, "LATER")
	require.NoError(t, err)
	info, err := later.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}
