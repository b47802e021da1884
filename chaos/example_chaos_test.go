package chaos_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/chaos"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// A test's dependency fails 30 % of the time: what does the code under test do? Here,
// a retry of 3 attempts turns 30 % failed attempts into about 0.3³ = 2.7 % failed calls
// (1.7 % in this seeded run).
func Example() {
	errFlaky := fault.Retryable(errors.New("dependency failed"))
	inj := policy.Must(chaos.New(chaos.Options{Probability: 0.3, Err: errFlaky, Rand: jitter.Seeded(1, 2)}))
	clock := policytest.NewClock(policytest.NewClock(t0).Now()).AutoAdvance(true) // no real sleeping in a test
	withRetry := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock})), inj))
	without := policy.Must(policy.Wrap(inj))

	count := func(p *policy.Pipeline) (failed int) {
		for range 1000 {
			if p.Do(context.Background(), func(context.Context) error { return nil }) != nil {
				failed++
			}
		}
		return failed
	}
	fmt.Println("failed calls without a retry:", count(without), "of 1000")
	fmt.Println("failed calls with 3 attempts:", count(withRetry), "of 1000")
	// Output:
	// failed calls without a retry: 296 of 1000
	// failed calls with 3 attempts: 17 of 1000
}
