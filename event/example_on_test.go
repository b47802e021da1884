package event_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

// A hook on the retries of one pipeline: event.On hands it retry_scheduled events
// alone.
func ExampleOn() {
	clock := policytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).AutoAdvance(true)
	r := policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)}))
	log.SetFlags(0)
	_ = func() {
		policy.Observe(event.On(func(e event.Event) { log.Print(e) }, event.RetryScheduled))
	}
	p := policy.Must(policy.Wrap(r, policy.Name("db"), policy.Observe(event.On(func(e event.Event) {
		fmt.Println("retry", e.Attempt, "in", e.Delay, "because", e.Reason)
	}, event.RetryScheduled))))
	err := p.Do(context.Background(), func(context.Context) error { return fault.Retryable(errors.New("busy")) })
	fmt.Println(err != nil)
	// Output:
	// retry 2 in 50ms because retryable
	// retry 3 in 100ms because retryable
	// true
}
