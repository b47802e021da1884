package policytest_test

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

// A fake clock and a fake random source make a retry's sleeps exact and instant.
// The clock records each sleep, so a test asserts the delay schedule itself.
func ExampleNewClock() {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true) // every sleep ends at once
	r := policy.Must(retry.New(retry.Options{
		MaxAttempts: 4,
		Clock:       clock,
		Rand:        policytest.NewRand(0.5), // full jitter draws half of each window
	}))
	p := policy.Must(policy.Wrap(r))
	err := p.Do(context.Background(), func(context.Context) error {
		return fault.Retryable(errors.New("unavailable"))
	})
	fmt.Println("slept:", clock.Waits())
	fmt.Println("clock moved:", clock.Now().Sub(time.Unix(0, 0)))
	fmt.Println(err)
	// Output:
	// slept: [50ms 100ms 200ms]
	// clock moved: 350ms
	// retry: 4 attempts, attempts exhausted: unavailable
}
