package clock_test

import (
	"fmt"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy/policytest"
)

// A stage times an interval with a Stopwatch on the clock from its Options. A test
// hands it a fake clock, and time moves only when the test says so.
func ExampleStopwatch() {
	c := policytest.NewClock(time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC))

	w := clock.StartStopwatch(c, event.NeedsTiming)
	c.Advance(250 * time.Millisecond) // the work being timed
	now, elapsed := w.Stop()
	fmt.Println(w.Started().Format(time.TimeOnly), now.Format(time.StampMilli), elapsed)

	// An observer that needs only the event costs no reading of the clock.
	untimed := clock.StartStopwatch(c, event.NeedsEvent)
	c.Advance(time.Second)
	now, elapsed = untimed.Stop()
	fmt.Println(now.IsZero(), elapsed)
	// Output:
	// 12:00:00 Mar  1 12:00:00.250 250ms
	// true 0s
}
