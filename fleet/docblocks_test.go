package fleet_test

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fleet"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(obs event.Observer) error {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	s := policy.Must(fleet.New(rdb, fleet.Options{Observer: obs}))
	br, err := fleet.NewBreaker(s, breaker.Options{Name: "payments"})
	if err != nil {
		return err
	}
	bu, err := fleet.NewRatio(s, budget.RatioOptions{Name: "payments"})
	if err != nil {
		return err
	}
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), br, bu, policy.Must(retry.New(retry.Options{}))))
	// register br.Local() with breaker.Registry and metrics as any breaker
	_, _ = p, br.Local()
	return nil
}

// The README's fleet wiring, compiled.
var _ = func(rdb *redis.Client) error {
	s := policy.Must(fleet.New(rdb, fleet.Options{}))           // rdb needs ContextTimeoutEnabled
	br, err := fleet.NewBreaker(s, breaker.Options{Name: "db"}) // one trips it: all refuse until the same moment; one probes
	if err != nil {
		return err
	}
	bu, err := fleet.NewRatio(s, budget.RatioOptions{Name: "db"}) // retries ≤ 10 % of the fleet's calls (+ one floor for the fleet)
	if err != nil {
		return err
	}
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), br, bu, policy.Must(retry.New(retry.Options{}))))
	_ = p
	return nil
}
