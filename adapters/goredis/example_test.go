package goredis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A client built by NewClient leaves the retries to the pipeline: a GET reaches the
// server at most 3 times, where a client with its own retries under the same pipeline
// would send it 12 times.
func ExampleNewClient() {
	srv, err := fleettest.Start() // a real redis-server on a free loopback port
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 3})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 500 * time.Millisecond})), policy.Name("redis"))
	if err != nil {
		fmt.Println(err)
		return
	}
	rdb, err := goredis.NewClient(redis.Options{Addr: srv.Addr()}, p, goredis.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()

	ctx := context.Background()
	if err := rdb.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rdb.Get(ctx, "greeting").Val())
	fmt.Println(goredis.Explain(rdb.Options(), p))

	own := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis's own retries on
	defer own.Close()
	fmt.Println(goredis.Explain(own.Options(), p))
	// Output:
	// hello
	// go-redis: at most 3 sends per command that may run twice (3 by Backstop × 1 by the client), 1 per other command (3 on a refusal or a failed dial), dials per connection: 1; one retry owner
	// go-redis: at most 12 sends per command that may run twice (3 by Backstop × 4 by the client), 4 per other command (12 on a refusal or a failed dial), dials per connection: 5; two retry owners: call DisableClientRetries
}
