package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backstop-go/backstop/bulkhead"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// Inside the retry a bulkhead caps the attempts a dependency sees at once. With two
// slots taken, a third call is refused at once, before any attempt, and is not
// retried.
func ExampleNew() {
	b := policy.Must(bulkhead.New(bulkhead.Options{Name: "inventory", MaxConcurrent: 2}))
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{})), b))

	release := make(chan struct{})
	var in, done sync.WaitGroup
	for range 2 {
		in.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			_ = p.Do(context.Background(), func(context.Context) error { in.Done(); <-release; return nil })
		}()
	}
	in.Wait()

	err := p.Do(context.Background(), func(context.Context) error { return nil })
	var rej *policy.RejectError
	fmt.Println(errors.Is(err, bulkhead.ErrFull), errors.As(err, &rej) && rej.Reason == bulkhead.ReasonLimit)
	fmt.Println(err)
	close(release)
	done.Wait()
	fmt.Println("in flight:", b.InFlight())
	// Output:
	// true true
	// retry: 1 attempt, error not retryable: bulkhead inventory: rejected (limit)
	// in flight: 0
}
