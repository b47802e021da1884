package jetstream_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/redeliver"
	rjs "github.com/backstop-go/backstop/redeliver/jetstream"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// broker is a real JetStream server on 127.0.0.1, embedded, with a JOBS stream, a DLQ
// stream and a durable consumer of JOBS.
type broker struct {
	js   jetstream.JetStream
	cons jetstream.Consumer
	dlq  jetstream.Consumer
}

func newBroker(t *testing.T) *broker {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "the embedded NATS server started")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}})
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy,
		MaxDeliver: -1, AckWait: 30 * time.Second})
	require.NoError(t, err)
	dlq, err := js.CreateOrUpdateConsumer(ctx, "DLQ", jetstream.ConsumerConfig{Durable: "dlq-reader", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	return &broker{js: js, cons: cons, dlq: dlq}
}

// delivery is one call of the handler.
type delivery struct {
	n  int
	at time.Time
	d  redeliver.Decision
}

// run consumes with a Consumer whose handler answers fail(n) for delivery n, until
// done says so or 20 s pass (a bound on a broken test, not a timing), and returns the
// deliveries seen.
func run(t *testing.T, b *broker, p *redeliver.Schedule, fail func(n int) error, done func([]delivery) bool) []delivery {
	t.Helper()
	var mu sync.Mutex
	var seen []delivery
	finished := make(chan struct{})
	c, err := rjs.New(b.js, p, func(_ context.Context, msg jetstream.Msg) error {
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		return fail(int(meta.NumDelivered))
	}, rjs.Options{DeadLetter: "dlq.jobs", OnDecide: func(_ jetstream.Msg, n int, d redeliver.Decision) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, delivery{n: n, at: time.Now(), d: d})
		if done(seen) {
			select {
			case <-finished:
			default:
				close(finished)
			}
		}
	}})
	require.NoError(t, err)
	cc, err := b.cons.Consume(c.Handle)
	require.NoError(t, err)
	defer cc.Stop()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("the deliveries did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]delivery(nil), seen...)
}

var errJob = errors.New("the job failed")

func publish(t *testing.T, b *broker, body string) {
	t.Helper()
	msg := nats.NewMsg("jobs.email")
	msg.Data = []byte(body)
	msg.Header.Set("Job-Id", body)
	_, err := b.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

func lastDecision(ds []delivery) redeliver.Decision { return ds[len(ds)-1].d }

// TestFailsThreeTimesThenSucceeds: delivered 4 times, with delays that grow as the
// policy decided (20, 40, 80 ms), each redelivery no sooner than its delay.
func TestFailsThreeTimesThenSucceeds(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-1")
	p := policy.Must(redeliver.New(redeliver.Options{Base: 20 * time.Millisecond, Cap: time.Second, Strategy: retry.None{}}))
	ds := run(t, b, p, func(n int) error {
		if n <= 3 {
			return errJob
		}
		return nil
	}, func(ds []delivery) bool { return !lastDecision(ds).Retry })
	require.Len(t, ds, 4)
	for i, want := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		require.Equal(t, i+1, ds[i].n)
		require.Equal(t, want, ds[i].d.Delay)
		require.GreaterOrEqual(t, ds[i+1].at.Sub(ds[i].at), want, "redelivery %d came no sooner than its delay", i+2)
	}
	require.Equal(t, redeliver.ReasonSuccess, ds[3].d.Reason)
}

func readDLQ(t *testing.T, b *broker) jetstream.Msg {
	t.Helper()
	batch, err := b.dlq.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	for msg := range batch.Messages() {
		require.NoError(t, msg.Ack())
		return msg
	}
	t.Fatal("nothing in the dead-letter stream")
	return nil
}

// TestAlwaysFailingLandsInTheDeadLetterStream: after MaxDeliveries the message is in
// the dead-letter stream with its history, and terminated.
func TestAlwaysFailingLandsInTheDeadLetterStream(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-2")
	p := policy.Must(redeliver.New(redeliver.Options{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond, MaxDeliveries: 3}))
	ds := run(t, b, p, func(int) error { return errJob }, func(ds []delivery) bool { return lastDecision(ds).DeadLetter })
	require.Len(t, ds, 3)
	require.Equal(t, redeliver.ReasonExhausted, ds[2].d.Reason)
	dead := readDLQ(t, b)
	require.Equal(t, "job-2", string(dead.Data()))
	h := dead.Headers()
	require.Equal(t, "job-2", h.Get("Job-Id"), "the message's own headers are kept")
	require.Equal(t, errJob.Error(), h.Get(rjs.HeaderError))
	require.Equal(t, redeliver.ReasonExhausted, h.Get(rjs.HeaderReason))
	require.Equal(t, "3", h.Get(rjs.HeaderDeliveries))
	require.Equal(t, "jobs.email", h.Get(rjs.HeaderOrigSubject))
	first, err1 := time.Parse(time.RFC3339Nano, h.Get(rjs.HeaderFirstDelivery))
	last, err2 := time.Parse(time.RFC3339Nano, h.Get(rjs.HeaderLastDelivery))
	require.NoError(t, errors.Join(err1, err2))
	require.False(t, last.Before(first))
}

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-3")
	p := policy.Must(redeliver.New(redeliver.Options{Base: 10 * time.Millisecond}))
	ds := run(t, b, p, func(int) error { return fault.Permanent(errJob) }, func(ds []delivery) bool { return lastDecision(ds).DeadLetter })
	require.Len(t, ds, 1)
	require.Equal(t, redeliver.ReasonPermanent, ds[0].d.Reason)
	require.Equal(t, redeliver.ReasonPermanent, readDLQ(t, b).Headers().Get(rjs.HeaderReason))
}

// TestNothingLostWhenTheConsumerRestarts: the worker stops after two failed
// deliveries; a new worker on the same durable consumer gets the message again,
// with its delivery count going on, and finishes it.
func TestNothingLostWhenTheConsumerRestarts(t *testing.T) {
	b := newBroker(t)
	publish(t, b, "job-4")
	// Un-jittered 100 ms and more: the second redelivery cannot come before the first
	// worker has stopped.
	p := policy.Must(redeliver.New(redeliver.Options{Base: 100 * time.Millisecond, Cap: time.Second, Strategy: retry.None{}}))
	first := run(t, b, p, func(int) error { return errJob }, func(ds []delivery) bool { return len(ds) == 2 })
	require.Equal(t, []int{1, 2}, []int{first[0].n, first[1].n})
	second := run(t, b, p, func(n int) error {
		if n < 4 {
			return errJob
		}
		return nil
	}, func(ds []delivery) bool { return !lastDecision(ds).Retry })
	var ns []string
	for _, d := range second {
		ns = append(ns, strconv.Itoa(d.n))
	}
	require.Equal(t, []string{"3", "4"}, ns, "the count goes on across the restart")
	require.Equal(t, redeliver.ReasonSuccess, lastDecision(second).Reason)
}
