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
	s := fleet.MustNew(rdb, fleet.Options{Observer: obs})
	br, err := fleet.NewBreaker(s, "payments", breaker.Options{})
	if err != nil {
		return err
	}
	bu, err := fleet.NewRatio(s, "payments", budget.RatioOptions{})
	if err != nil {
		return err
	}
	p := policy.MustWrap(deadline.MustNew(2*time.Second), br, bu, retry.MustNew(retry.Options{}))
	// register br.Local() with breaker.Registry and metrics as any breaker
	_, _ = p, br.Local()
	return nil
}

// The README's fleet wiring, compiled.
var _ = func(rdb *redis.Client) error {
	s := fleet.MustNew(rdb, fleet.Options{})                // rdb needs ContextTimeoutEnabled
	br, err := fleet.NewBreaker(s, "db", breaker.Options{}) // one trips it: all refuse until the same moment; one probes
	if err != nil {
		return err
	}
	bu, err := fleet.NewRatio(s, "db", budget.RatioOptions{}) // retries ≤ 10 % of the fleet's calls (+ one floor for the fleet)
	if err != nil {
		return err
	}
	p := policy.MustWrap(deadline.MustNew(2*time.Second), br, bu, retry.MustNew(retry.Options{}))
	_ = p
	return nil
}
