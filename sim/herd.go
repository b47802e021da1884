package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// Brooker's herd ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015):
// clients each update one database row once with optimistic concurrency control —
// read the row's version, write it back conditionally; a stale write fails, and the
// client backs off and reads again — every message crossing a network whose delay is
// |Normal(10 ms, 2 ms)|. Each client is a pipeline with Backstop's retry (its backoff
// on the engine's clock); an attempt is one read and one conditional write.

// The herd's one-way delay on the wire: |Normal(herdNetwork, herdNetworkSigma)|.
const (
	herdNetwork      = 10 * time.Millisecond
	herdNetworkSigma = 2 * time.Millisecond
)

// herdRun is one herd: its writes, failed and successful (the work), and when the last
// client's update succeeded.
type herdRun struct {
	Writes int
	Done   time.Duration
}

var errStale = errors.New("sim: stale write")

// herd plays n clients, each retrying with o (its Clock and Rand are set here), inside
// the current bubble.
func herd(n int, o retry.Options, seed uint64) herdRun {
	e := newEngine()
	clk := e.Clock()
	net := rand.New(rand.NewPCG(seed, 4))
	var (
		mu        sync.Mutex // guards what follows
		version   int
		run       herdRun
		remaining = n
	)
	start := time.Now()
	wire := func() {
		mu.Lock()
		d := time.Duration(math.Abs(net.NormFloat64()*float64(herdNetworkSigma) + float64(herdNetwork)))
		mu.Unlock()
		<-clk.NewTimer(d).C()
	}
	var wg sync.WaitGroup
	for c := range n {
		o := o
		o.Clock, o.Rand = clk, jitter.Seeded(seed, uint64(c)+16)
		o.MaxAttempts = math.MaxInt32
		p := policy.Must(policy.Wrap(policy.Must(retry.New(o))))
		wg.Go(func() {
			_ = p.Do(context.Background(), func(context.Context) error {
				wire() // the read's way there
				mu.Lock()
				v := version
				mu.Unlock()
				wire() // its answer, then the write's way there
				wire()
				mu.Lock()
				run.Writes++
				ok := v == version
				if ok {
					version++
				}
				mu.Unlock()
				wire() // the write's answer
				if !ok {
					return fault.Retryable(errStale)
				}
				mu.Lock()
				run.Done = max(run.Done, time.Since(start))
				remaining--
				mu.Unlock()
				return nil
			})
		})
	}
	e.loop(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return remaining == 0
	})
	wg.Wait()
	return run
}
