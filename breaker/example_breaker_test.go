package breaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/policy"
)

func ExampleNew() {
	b, err := breaker.New(breaker.Options{Name: "db", ConsecutiveFailures: 2})
	if err != nil {
		panic(err)
	}
	p := policy.Must(policy.Wrap(b))
	down := func(context.Context) error { return errors.New("connection refused") }
	for range 3 {
		err := p.Do(context.Background(), down)
		fmt.Printf("%-6v open: %v, rejected: %v\n", b.State(), errors.Is(err, breaker.ErrOpen), errors.Is(err, policy.ErrRejected))
	}
	// Output:
	// closed open: false, rejected: false
	// open   open: false, rejected: false
	// open   open: true, rejected: true
}
