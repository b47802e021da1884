package callpath_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// One retry owns a call path. A service's pipeline retries up to 3 times and calls a
// client's pipeline, which retries up to 3 times too. Under the owner, the inner
// retry makes one attempt each time: the work runs 3 times, not 9.
func ExampleOwned() {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true) // sleeps pass at once
	newRetry := func() policy.Policy {
		return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Strategy: retry.None{}, Clock: clock}))
	}
	service := policy.Must(policy.Wrap(newRetry(), policy.Name("service")))
	client := policy.Must(policy.Wrap(newRetry(), policy.Name("client")))

	fmt.Println("owned before:", callpath.Owned(context.Background()))
	calls := 0
	err := service.Do(context.Background(), func(ctx context.Context) error {
		return client.Do(ctx, func(ctx context.Context) error {
			calls++
			n, _, _ := callpath.Attempt(ctx)
			fmt.Printf("work runs: owned=%v, owner's attempt %d\n", callpath.Owned(ctx), n)
			return fault.Retryable(errors.New("unavailable"))
		})
	})
	fmt.Println("calls:", calls, "err:", err != nil)
	// Output:
	// owned before: false
	// work runs: owned=true, owner's attempt 1
	// work runs: owned=true, owner's attempt 2
	// work runs: owned=true, owner's attempt 3
	// calls: 3 err: true
}
