package policy_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A deadline inside the retry would bound each attempt, not the call: Wrap refuses it
// and says how to fix it.
func ExampleWrap_wrongOrder() {
	d := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
	r := policy.Must(retry.New(retry.Options{}))
	_, err := policy.Wrap(r, d) //backstopvet:ignore wraporder (the example shows the refusal)
	fmt.Println(err)
	fmt.Println(errors.Is(err, policy.ErrOrder))
	// Output:
	// policy: O1: deadline at position 2 is inside retry at position 1; move the deadline outward or use deadline.NewPerAttempt
	// true
}

func ExampleWrap() {
	d := policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second}))
	r := policy.Must(retry.New(retry.Options{MaxAttempts: 3}))
	p, err := policy.Wrap(d, r)
	if err != nil {
		panic(err)
	}
	p = p.With(policy.Name("users"))
	fmt.Println(p)

	name, err := policy.Get(context.Background(), p, func(ctx context.Context) (string, error) {
		return "ada", nil
	})
	fmt.Println(name, err)
	// Output:
	// users: deadline → retry
	// ada <nil>
}
