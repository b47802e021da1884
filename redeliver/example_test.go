package redeliver_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/redeliver"
)

// A schedule decides each failed delivery of a message in turn: redeliver it after a
// growing delay, then dead-letter it. A permanent error is dead-lettered at once.
func ExampleSchedule_Decide() {
	s, err := redeliver.New(redeliver.Options{
		Base:          time.Second,
		MaxDeliveries: 4,
		Rand:          policytest.NewRand(0.5), // full jitter draws half the window each time
	})
	if err != nil {
		panic(err)
	}
	failed := errors.New("payment service unavailable")
	for n := 1; n <= 4; n++ {
		d := s.Decide(n, failed)
		fmt.Printf("delivery %d: retry=%v delay=%v dead_letter=%v (%s)\n", n, d.Retry, d.Delay, d.DeadLetter, d.Reason)
	}
	d := s.Decide(1, fault.Permanent(errors.New("malformed order")))
	fmt.Printf("permanent: dead_letter=%v (%s)\n", d.DeadLetter, d.Reason)
	// Output:
	// delivery 1: retry=true delay=500ms dead_letter=false (retry)
	// delivery 2: retry=true delay=1s dead_letter=false (retry)
	// delivery 3: retry=true delay=2s dead_letter=false (retry)
	// delivery 4: retry=false delay=0s dead_letter=true (exhausted)
	// permanent: dead_letter=true (permanent)
}
