package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/retry"
)

func Example() {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true) // sleeps pass at once
	r, err := retry.New(retry.Options{
		MaxAttempts: 4,
		Strategy:    retry.None{}, // no jitter, so the output is fixed
		Clock:       clock,
	})
	if err != nil {
		panic(err)
	}
	p := policy.Must(policy.Wrap(r)).With(policy.Observe(event.ObserverFunc(func(e event.Event) {
		if e.Kind == event.RetryScheduled {
			fmt.Printf("attempt %d in %v (%s)\n", e.Attempt, e.Delay, e.Reason)
		}
	})))

	calls := 0
	err = p.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return fault.Retryable(errors.New("503 Service Unavailable"))
		}
		return nil
	})
	fmt.Println("calls:", calls, "err:", err)
	// Output:
	// attempt 2 in 100ms (retryable)
	// attempt 3 in 200ms (retryable)
	// calls: 3 err: <nil>
}

func ExampleError() {
	clock := policytest.NewClock(time.Unix(0, 0)).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Clock: clock}))))
	err := p.Do(context.Background(), func(context.Context) error {
		return fault.Retryable(errors.New("connection reset"))
	})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println(re.Attempts, errors.Is(err, retry.ErrExhausted))
	}
	fmt.Println(err)
	// Output:
	// 2 true
	// retry: 2 attempts, attempts exhausted: connection reset
}

// A hedge sends a second attempt when the first is slow, and keeps whichever answers
// first; the slow one is cancelled.
func ExampleNewHedge() {
	h := policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: 20 * time.Millisecond})) // near the p95 latency
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), h))
	err := p.Do(context.Background(), func(ctx context.Context) error {
		n, _, _ := callpath.Attempt(ctx)
		if n == 1 {
			<-ctx.Done() // the first attempt hangs: a slow replica
			return ctx.Err()
		}
		fmt.Println("attempt", n, "answered")
		return nil
	})
	fmt.Println("call:", err)
	// Output:
	// attempt 2 answered
	// call: <nil>
}
