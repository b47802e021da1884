package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
	"github.com/backstop-go/backstop/throttle"
)

// A throttle inside the retry sees every attempt, as the backend does. When the
// backend starts refusing work, the client refuses most of it locally.
func ExampleNew() {
	th := policy.Must(throttle.New(throttle.Options{Name: "inventory", Rand: jitter.Seeded(1, 2)})) // K = 2 over 2 min
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: time.Second})), policy.Must(retry.New(retry.Options{})), th))
	local := 0
	for range 1000 {
		err := p.Do(context.Background(), func(context.Context) error { return overloaded{} })
		if errors.Is(err, throttle.ErrThrottled) {
			local++
		}
	}
	fmt.Printf("refused locally: %d of 1000 calls; now refusing with probability %.2f\n", local, th.Probability())
	// Output:
	// refused locally: 988 of 1000 calls; now refusing with probability 1.00
}
