package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// An overall deadline outside the retry bounds every attempt and every backoff; a
// per-attempt timeout inside it bounds one attempt. A call that runs out of our time
// is told apart from the caller giving up.
func Example() {
	overall := policy.Must(deadline.New(deadline.Options{Timeout: 50 * time.Millisecond}))
	perAttempt := policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 10 * time.Millisecond}))
	breaker := policy.Must(breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 100}))
	retry := policy.Must(retry.New(retry.Options{MaxAttempts: 100, Base: time.Millisecond, Cap: time.Millisecond}))
	p, err := policy.Wrap(overall, breaker, retry, perAttempt)
	if err != nil {
		fmt.Println(err)
		return
	}
	attempts := 0
	err = p.Do(context.Background(), func(ctx context.Context) error {
		attempts++
		<-ctx.Done() // a dependency that never answers
		return ctx.Err()
	})
	switch {
	case errors.Is(err, deadline.ErrExceeded): // our limit ran out
		fmt.Println("our 50ms ran out after more than one attempt:", attempts > 1)
	case errors.Is(err, context.Canceled): // the caller gave up
		fmt.Println("the caller gave up")
	}
	// Output:
	// our 50ms ran out after more than one attempt: true
}
