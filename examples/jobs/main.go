// Command jobs runs a worker on NATS JetStream (a real server, embedded, on 127.0.0.1)
// that processes jobs with redeliver's backoff: some succeed at once, some fail a few
// times and then succeed, one always fails and one fails permanently. It prints each
// job's delivery timeline — when it was delivered, what happened, how long the policy
// asked JetStream to wait — and the dead-letter stream's contents.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/backstop-go/backstop/jitter"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/redeliver"
	rjs "github.com/backstop-go/backstop/redeliver/jetstream"
)

// jobs says how each job behaves: fail its first N deliveries, fail always, or fail
// permanently.
var jobs = []struct {
	id       string
	failures int // −1: always; −2: permanently
}{
	{"send-invoice-1", 0}, {"send-invoice-2", 0}, {"resize-image-7", 2}, {"sync-crm-3", 3}, {"charge-card-9", -1}, {"import-csv-4", -2},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

type event struct {
	at time.Duration
	n  int
	d  redeliver.Decision
}

func run() error {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: os.TempDir() + "/backstop-jobs-" + fmt.Sprint(os.Getpid()), NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown(); _ = os.RemoveAll(srv.StoreDir()) }()
	if !srv.ReadyForConnections(10 * time.Second) {
		return errors.New("the NATS server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}}); err != nil {
		return err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "worker",
		AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1, AckWait: 30 * time.Second})
	if err != nil {
		return err
	}

	// Job-sized defaults would wait minutes; the demo scales them down to 100 ms.
	p := policy.Must(redeliver.New(redeliver.Options{Base: 100 * time.Millisecond, Cap: 2 * time.Second, MaxDeliveries: 4,
		Rand: jitter.Seeded(1, 2)}))
	behaviour := map[string]int{}
	for _, j := range jobs {
		behaviour[j.id] = j.failures
	}
	start := time.Now()
	var mu sync.Mutex
	timeline := map[string][]event{}
	final := 0
	done := make(chan struct{})
	worker, err := rjs.New(js, p, func(_ context.Context, msg jetstream.Msg) error {
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		switch f := behaviour[string(msg.Data())]; {
		case f == -2:
			return fault.Permanent(errors.New("the CSV is malformed"))
		case f == -1 || int(meta.NumDelivered) <= f:
			return errors.New("the downstream service is unavailable")
		}
		return nil
	}, rjs.Options{DeadLetter: "dlq.jobs", OnDecide: func(msg jetstream.Msg, n int, d redeliver.Decision) {
		mu.Lock()
		defer mu.Unlock()
		id := string(msg.Data())
		timeline[id] = append(timeline[id], event{at: time.Since(start), n: n, d: d})
		if !d.Retry {
			if final++; final == len(jobs) {
				close(done)
			}
		}
	}})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(worker.Handle)
	if err != nil {
		return err
	}
	defer cc.Stop()
	for _, j := range jobs {
		if _, err := js.Publish(ctx, "jobs."+strings.SplitN(j.id, "-", 2)[0], []byte(j.id)); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a bound on a broken run
		return errors.New("the jobs did not finish within 30 s")
	}
	cc.Stop()

	fmt.Println("jobs: a JetStream worker with redeliver (base 100 ms, cap 2 s, full jitter, dead-letter after 4 deliveries)")
	fmt.Println()
	mu.Lock()
	ids := make([]string, 0, len(timeline))
	for id := range timeline {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Printf("%s\n", id)
		for _, e := range timeline[id] {
			what := "ok, acked"
			switch {
			case e.d.Retry:
				what = fmt.Sprintf("failed, redeliver in %v", e.d.Delay.Round(time.Millisecond))
			case e.d.DeadLetter:
				what = "failed, dead-lettered (" + e.d.Reason + ")"
			}
			fmt.Printf("  delivery %d at +%5dms: %s\n", e.n, e.at.Milliseconds(), what)
		}
	}
	mu.Unlock()

	dlq, err := js.CreateOrUpdateConsumer(ctx, "DLQ", jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	batch, err := dlq.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	fmt.Println("\ndead-letter stream:")
	dead := 0
	for msg := range batch.Messages() {
		h := msg.Headers()
		fmt.Printf("  %s: %s after %s deliveries: %q\n", msg.Data(), h.Get(rjs.HeaderReason), h.Get(rjs.HeaderDeliveries), h.Get(rjs.HeaderError))
		_ = msg.Ack()
		dead++
	}
	st := worker.Stats()
	fmt.Printf("\njobs: %d deliveries, %d acked, %d redelivered, %d dead-lettered\n", st.Deliveries, st.Acked, st.Retried, st.DeadLettered)
	if st.Acked != 4 || st.DeadLettered != 2 || dead != 2 {
		return fmt.Errorf("want 4 acked and 2 dead-lettered; got %+v with %d in the dead-letter stream", st, dead)
	}
	// What metrics.AddRedeliver exports: the policy's own count of its decisions.
	c := p.Counts()
	redelivered := c.Retries[len(c.Retries)-1]
	fmt.Printf("jobs: the policy decided %d deliveries: %d redelivered (%v of delay in all), %d dead-lettered permanent, %d exhausted\n",
		c.Deliveries, redelivered, c.DelaySum.Round(time.Millisecond), c.Permanent, c.Exhausted)
	if c.Deliveries != st.Deliveries || redelivered != st.Retried || c.Permanent+c.Exhausted != st.DeadLettered {
		return fmt.Errorf("the policy's counts %+v disagree with the worker's %+v", c, st)
	}
	fmt.Println("jobs: ok")
	return nil
}
