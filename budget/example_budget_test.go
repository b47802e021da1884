package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// A token bucket makes retries fade out when a dependency stays down: once failures
// have drained it to half, calls make one attempt each.
func ExampleNewTokenBucket() {
	b, err := budget.NewTokenBucket(10, 0.1) // gRPC's example retryThrottling
	if err != nil {
		panic(err)
	}
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	p := policy.MustWrap(b, retry.MustNew(retry.Options{MaxAttempts: 4, Clock: clock}))
	for call := 1; call <= 3; call++ {
		attempts := 0
		err := p.Do(context.Background(), func(context.Context) error {
			attempts++
			return retry.Retryable(errors.New("unavailable"))
		})
		fmt.Printf("call %d: %d attempts, tokens %.0f, budget refused: %v\n",
			call, attempts, b.Tokens(), errors.Is(err, retry.ErrBudget))
	}
	// Output:
	// call 1: 4 attempts, tokens 6, budget refused: false
	// call 2: 1 attempts, tokens 5, budget refused: true
	// call 3: 1 attempts, tokens 4, budget refused: true
}
