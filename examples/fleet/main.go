// Command fleet runs three replicas of a service against a database that goes down,
// twice: once with a breaker and a retry budget in each process, once with the fleet
// policies, which share one breaker and one budget through a real redis-server (on a
// free 127.0.0.1 port, started and stopped here). It prints how many attempts reached
// the down database each way, then stops Redis while the replicas keep calling, to
// show the fleet policies fall back to their local state and lose no call.
//
// It needs redis-server on the PATH (Debian: apt-get install -y redis-server).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fleet"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

func main() {
	replicas := flag.Int("replicas", 3, "replicas of the service")
	outage := flag.Duration("outage", 2*time.Second, "how long the database is down")
	every := flag.Duration("every", 5*time.Millisecond, "each replica's pause between calls")
	flag.Parse()
	redis.SetLogger(quiet{}) // the dial failures while Redis is stopped are the point
	if err := run(*replicas, *outage, *every); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// The policies of every replica, both ways.
var (
	breakerOptions = breaker.Options{ConsecutiveFailures: 5, OpenTimeout: 400 * time.Millisecond}
	budgetOptions  = budget.RatioOptions{Ratio: 0.1, MinPerSecond: 5}
	retryOptions   = retry.Options{MaxAttempts: 4, Base: time.Millisecond, Cap: 5 * time.Millisecond}
)

var errDown = errors.New("database down")

// database counts the attempts that reach it; while down it fails them.
type database struct {
	down     atomic.Bool
	attempts atomic.Int64
}

func (d *database) query(context.Context) error {
	d.attempts.Add(1)
	if d.down.Load() {
		return fault.Retryable(errDown)
	}
	return nil
}

// tally is what a run of the replicas saw.
type tally struct {
	calls, ok, refused, failed atomic.Int64
}

// drive makes every replica call through its pipeline every pause until stop, and
// counts the outcomes.
func drive(pipelines []*policy.Pipeline, db *database, every time.Duration, stop <-chan struct{}) *tally {
	t := &tally{}
	var wg sync.WaitGroup
	for _, p := range pipelines {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				t.calls.Add(1)
				switch err := p.Do(context.Background(), db.query); {
				case err == nil:
					t.ok.Add(1)
				case errors.Is(err, policy.ErrRejected):
					t.refused.Add(1)
				default:
					t.failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return t
}

// outage runs the replicas through a database outage and returns the attempts that
// reached it and the retries the budgets allowed.
func outage(pipelines []*policy.Pipeline, budgets []budget.Budget, d, every time.Duration) (attempts int64, retries uint64, t *tally) {
	db := &database{}
	db.down.Store(true)
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	t = drive(pipelines, db, every, stop)
	for _, b := range budgets {
		retries += b.Allowed()
	}
	return db.attempts.Load(), retries, t
}

func run(n int, d, every time.Duration) error {
	if n < 1 {
		return fmt.Errorf("-replicas is %d; want ≥ 1", n)
	}
	srv, err := fleettest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Printf("fleet: %d replicas, a call every %v each, against a database down for %v\n", n, every, d)
	fmt.Printf("fleet: each replica: Wrap(breaker (5 failures, open %v), budget (10%% of calls + 5/s), retry (4 attempts))\n", breakerOptions.OpenTimeout)

	// Per-process policies.
	var local []*policy.Pipeline
	var localBudgets []budget.Budget
	for i := range n {
		o := breakerOptions
		o.Name = fmt.Sprintf("db-%d", i)
		br, err := breaker.New(o)
		if err != nil {
			return err
		}
		bu, err := budget.NewRatio(budgetOptions)
		if err != nil {
			return err
		}
		local = append(local, policy.Must(policy.Wrap(br, bu, policy.Must(retry.New(retryOptions)))))
		localBudgets = append(localBudgets, bu)
	}
	la, lr, lt := outage(local, localBudgets, d, every)
	fmt.Printf("fleet: per-process policies: %d attempts reached the down database (%d retries; %d of %d calls refused by the breakers)\n",
		la, lr, lt.refused.Load(), lt.calls.Load())

	// The fleet policies: each replica has a client (a pool) of its own, as separate
	// processes would.
	var events atomic.Int64
	var shared []*policy.Pipeline
	var fleetBudgets []budget.Budget
	var breakers []*fleet.Breaker
	for range n {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		defer rdb.Close()
		s, err := fleet.New(rdb, fleet.Options{Observer: event.ObserverFunc(func(e event.Event) {
			if e.Kind == event.Fleet {
				events.Add(1)
			}
		})})
		if err != nil {
			return err
		}
		bo, ro := breakerOptions, budgetOptions
		bo.Name, ro.Name = "db", "db"
		br, err := fleet.NewBreaker(s, bo)
		if err != nil {
			return err
		}
		defer br.Close()
		bu, err := fleet.NewRatio(s, ro)
		if err != nil {
			return err
		}
		defer bu.Close()
		shared = append(shared, policy.Must(policy.Wrap(br, bu, policy.Must(retry.New(retryOptions)))))
		fleetBudgets = append(fleetBudgets, bu)
		breakers = append(breakers, br)
	}
	fa, fr, ft := outage(shared, fleetBudgets, d, every)
	fmt.Printf("fleet: fleet policies on Redis:  %d attempts reached the down database (%d retries; %d of %d calls refused by the breaker)\n",
		fa, fr, ft.refused.Load(), ft.calls.Load())
	fmt.Printf("fleet: the fleet's shared breaker and budget sent %.0f%% of the attempts per-process policies sent\n", 100*float64(fa)/float64(la))

	// The database is back: one replica's probe closes the breaker for the fleet.
	db := &database{}
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		for !allClosed(breakers) && time.Since(start) < 10*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		close(stop)
	}()
	t := drive(shared, db, every, stop)
	fmt.Printf("fleet: database back: the fleet's breaker closed everywhere within %v; %d attempts (%d calls) reached it meanwhile\n",
		time.Since(start).Round(10*time.Millisecond), db.attempts.Load(), t.calls.Load()-t.refused.Load())
	if !allClosed(breakers) {
		return errors.New("the breakers did not close after the database came back")
	}

	// Redis goes away: every call still goes through, on each replica's local state.
	srv.Stop()
	db = &database{}
	stop = make(chan struct{})
	time.AfterFunc(time.Second, func() { close(stop) })
	t = drive(shared, db, every, stop)
	lost := t.calls.Load() - t.ok.Load()
	fmt.Printf("fleet: Redis stopped: %d calls in 1s, %d answered, %d lost; %d of %d breakers deciding locally\n",
		t.calls.Load(), t.ok.Load(), lost, n-count(breakers), n)
	if err := srv.Restart(); err != nil {
		return err
	}
	back := time.Now().Add(10 * time.Second)
	for !allShared(breakers) && time.Now().Before(back) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("fleet: Redis back: %d breakers shared again; %d fleet events (fell back, came back)\n", count(breakers), events.Load())

	switch {
	case fa >= la:
		return fmt.Errorf("the fleet policies sent %d attempts, per-process ones %d; want fewer", fa, la)
	case lost != 0:
		return fmt.Errorf("%d calls lost while Redis was down", lost)
	case !allShared(breakers):
		return errors.New("the breakers did not return to the shared state")
	}
	fmt.Println("fleet: ok")
	return nil
}

// quiet drops go-redis's own log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func allClosed(bs []*fleet.Breaker) bool {
	for _, b := range bs {
		if b.Local().State() != breaker.StateClosed {
			return false
		}
	}
	return true
}

func allShared(bs []*fleet.Breaker) bool { return count(bs) == len(bs) }

func count(bs []*fleet.Breaker) int {
	n := 0
	for _, b := range bs {
		if b.Shared() {
			n++
		}
	}
	return n
}
