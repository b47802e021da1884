package fallback_test

import (
	"context"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fallback"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/ratelimit"
	"github.com/backstop-go/backstop/retry"
)

// The README's full client stack, compiled with the tests so that it cannot drift
// from the API; it is not run.
var _ = func(ctx context.Context, loadPrice func(context.Context) (Price, error)) (Price, error) {
	prices := fallback.MustNew("prices", fallback.Options[Price]{LastGood: 10 * time.Minute})
	p := policy.MustWrap(prices, deadline.MustNew(2*time.Second),
		bulkhead.MustNew("prices", bulkhead.Options{MaxConcurrent: 32, MaxQueue: 64, MaxWait: 100 * time.Millisecond}),
		breaker.MustNew("prices", breaker.Options{}), budget.MustNewTokenBucket(10, 0.1),
		retry.MustNew(retry.Options{}), ratelimit.MustNew("prices", ratelimit.Options{Rate: 100, Burst: 20}),
		deadline.MustPerAttempt(300*time.Millisecond), policy.Name("prices"))
	price, err := prices.Get(ctx, p, loadPrice) // the last good price while the service is down
	return price, err
}
