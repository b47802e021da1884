package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/ratelimit"
)

// In Refuse mode a client that has used its quota is refused at once, and told when
// the next token comes.
func ExampleNew() {
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := policy.Must(ratelimit.New(ratelimit.Options{Name: "geocoder", Rate: 5, Burst: 3, Mode: ratelimit.Refuse, Clock: clock}))
	p := policy.Must(policy.Wrap(api))
	for i := range 5 {
		err := p.Do(context.Background(), func(context.Context) error { return nil })
		var rej *policy.RejectError
		if errors.As(err, &rej) {
			fmt.Printf("call %d: refused (%s), come back in %v\n", i+1, rej.Reason, rej.RetryAfter)
			continue
		}
		fmt.Printf("call %d: sent\n", i+1)
	}
	clock.Advance(200 * time.Millisecond)
	fmt.Println("200ms later:", p.Do(context.Background(), func(context.Context) error { return nil }))
	// Output:
	// call 1: sent
	// call 2: sent
	// call 3: sent
	// call 4: refused (no_token), come back in 200ms
	// call 5: refused (no_token), come back in 200ms
	// 200ms later: <nil>
}

// Pipelines that name the same limiter in a Registry share its bucket.
func ExampleRegistry() {
	var limiters ratelimit.Registry
	o := ratelimit.Options{Name: "geocoder", Rate: 1, Burst: 1, Mode: ratelimit.Refuse}
	a, err := limiters.Get(o)
	if err != nil {
		panic(err)
	}
	b, err := limiters.Get(o)
	if err != nil {
		panic(err)
	}
	search, checkout := policy.Must(policy.Wrap(a, policy.Name("search"))), policy.Must(policy.Wrap(b, policy.Name("checkout")))
	fmt.Println(search.Do(context.Background(), func(context.Context) error { return nil }))
	fmt.Println(errors.Is(checkout.Do(context.Background(), func(context.Context) error { return nil }), ratelimit.ErrLimited))
	// Output:
	// <nil>
	// true
}
