package fleet_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/fleet"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/policy"
)

// Two replicas share one breaker: the first sees the failures and trips it; the
// second refuses its next call without having seen a failure of its own.
func ExampleNewBreaker() {
	srv, err := fleettest.Start() // a real redis-server on a free loopback port
	if err != nil {
		panic(err)
	}
	defer srv.Stop()
	var clients []*redis.Client // one per replica, with a pool of its own
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()

	replica := func(o breaker.Options) (*fleet.Breaker, *policy.Pipeline) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		defer func() { clients = append(clients, rdb) }()
		s := policy.Must(fleet.New(rdb, fleet.Options{}))
		o.Name = "payments"
		b, err := fleet.NewBreaker(s, o)
		if err != nil {
			panic(err)
		}
		return b, policy.Must(policy.Wrap(b))
	}
	a, pa := replica(breaker.Options{ConsecutiveFailures: 2})
	defer a.Close()
	opened := make(chan struct{}, 1)
	b, pb := replica(breaker.Options{ConsecutiveFailures: 2, OnStateChange: func(_ string, _, to breaker.State) {
		if to == breaker.StateOpen {
			opened <- struct{}{}
		}
	}})
	defer b.Close()

	down := func(context.Context) error { return errors.New("payments: connection refused") }
	_ = pa.Do(context.Background(), down)
	_ = pa.Do(context.Background(), down) // a trips the fleet's breaker

	<-opened // b hears of it within a SyncInterval (100 ms)
	err = pb.Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println("b:", errors.Is(err, breaker.ErrOpen))
	// Output:
	// b: true
}
