package shed_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/shed"
)

// As a policy, a shedder refuses work beyond its limit with a *policy.RejectError.
func ExampleShedder_Bind() {
	s := policy.Must(shed.New(shed.Options{Name: "consumer", Limit: shed.LimitOptions{Fixed: 1},
		Queue: shed.QueueOptions{Max: -1}, Rand: pinned(0)}))
	busy, _ := s.Admit(context.Background(), shed.PriorityDefault) // the one slot taken
	defer busy.Release()

	err := policy.Must(policy.Wrap(s)).Do(context.Background(), func(context.Context) error { return nil })
	var rej *policy.RejectError
	if errors.As(err, &rej) {
		fmt.Println(rej.Policy, rej.Name, rej.Reason, rej.RetryAfter, errors.Is(err, shed.ErrShed))
	}
	fmt.Println(err)
	// Output:
	// shed consumer limit 1s true
	// shed consumer: rejected (limit); retry after 1s
}
