package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// A token bucket makes retries fade out when a dependency stays down: once failures
// have drained it to half, calls make one attempt each.
func ExampleNewTokenBucket() {
	b, err := budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}) // gRPC's example retryThrottling
	if err != nil {
		panic(err)
	}
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{MaxAttempts: 4, Clock: clock}))))
	for call := 1; call <= 3; call++ {
		attempts := 0
		err := p.Do(context.Background(), func(context.Context) error {
			attempts++
			return fault.Retryable(errors.New("unavailable"))
		})
		fmt.Printf("call %d: %d attempts, tokens %.0f, budget refused: %v\n",
			call, attempts, b.Tokens(), errors.Is(err, retry.ErrBudget))
	}
	// Output:
	// call 1: 4 attempts, tokens 6, budget refused: false
	// call 2: 1 attempts, tokens 5, budget refused: true
	// call 3: 1 attempts, tokens 4, budget refused: true
}

// The AWS SDKs' retry quota: 500 tokens pay for 100 retries of 5 against a service
// that stays down; then calls make one attempt each until successes refill it.
func ExampleNewRetryQuota() {
	q := policy.Must(budget.NewRetryQuota(budget.RetryQuotaOptions{})) // 500 tokens, 14 a retry, 5 after a throttling error
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(q, policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	attempts := 0
	for range 100 {
		_ = p.Do(context.Background(), func(context.Context) error {
			attempts++
			return fault.Retryable(errors.New("unavailable"))
		})
	}
	fmt.Printf("100 calls, %d attempts, %d tokens left, %d retries refused\n", attempts, q.Tokens(), q.Refused())
	// Output:
	// 100 calls, 135 attempts, 10 tokens left, 83 retries refused
}

// A cap on retries in flight, around any budget: a burst of failures adds at most 2
// requests at a time to a struggling dependency.
func ExampleNewInFlight() {
	b := policy.Must(budget.NewInFlight(budget.InFlightOptions{Budget: policy.Must(budget.NewRatio(budget.RatioOptions{})), Max: 2}))
	p := policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{}))))
	fmt.Println(p.Explain().Stack[0].Summary)
	// Output:
	// retries at most 10% of the calls of the last 10s, plus 100 retries over that window; at most 2 retries in flight at once
}
