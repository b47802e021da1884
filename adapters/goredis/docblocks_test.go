package goredis_test

import (
	"context"

	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(br policy.Policy, addr string) (*redis.Client, error) {
	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), br, policy.Must(retry.New(retry.Options{})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * time.Millisecond})), policy.Name("redis"))
	if err != nil {
		return nil, err
	}
	rdb, err := goredis.NewClient(redis.Options{Addr: addr}, p, goredis.Options{})
	return rdb, err
}

// The wiring of Once the package documentation shows.
var _ = func(ctx context.Context, rdb *redis.Client, requestID string) (int64, error) {
	token := "once:" + requestID // unique per logical call
	n, err := goredis.Once(ctx, rdb, token, time.Hour, "incr", "visits").Int64()
	if err != nil {
		// unknown, for now: send Once(ctx, rdb, token, …) again when the server is
		// back; it runs the INCR once, or returns the reply of the run that happened
	}
	return n, err
}
