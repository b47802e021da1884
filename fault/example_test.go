package fault_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// The retry tries again only an error it knows to be worth it. An error of the
// application's own is not, until it is marked with Retryable.
func ExampleRetryable() {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true) // sleeps pass at once
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock}))))
	busy := errors.New("inventory: busy")

	for _, err := range []error{busy, fault.Retryable(busy)} {
		calls := 0
		got := p.Do(context.Background(), func(context.Context) error {
			calls++
			return err
		})
		fmt.Printf("retryable=%v calls=%d errors.Is(busy)=%v\n", fault.Of(err).Retryable, calls, errors.Is(got, busy))
	}
	// Output:
	// retryable=false calls=1 errors.Is(busy)=true
	// retryable=true calls=3 errors.Is(busy)=true
}
