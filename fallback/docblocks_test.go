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
	prices := policy.Must(fallback.New(fallback.Options[Price]{Name: "prices", LastGood: 10 * time.Minute}))
	p := policy.Must(policy.Wrap(prices, policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})),
		policy.Must(bulkhead.New(bulkhead.Options{Name: "prices", MaxConcurrent: 32, MaxQueue: 64, MaxWait: 100 * time.Millisecond})),
		policy.Must(breaker.New(breaker.Options{Name: "prices"})), policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})),
		policy.Must(retry.New(retry.Options{})), policy.Must(ratelimit.New(ratelimit.Options{Name: "prices", Rate: 100, Burst: 20})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond})), policy.Name("prices")))
	price, err := prices.Get(ctx, p, loadPrice) // the last good price while the service is down
	return price, err
}
