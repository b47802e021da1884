package event_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/event"
)

// An event prints as one line with the fields its kind uses. A log of a
// pipeline's events is then one ObserverFunc.
func ExampleEvent_String() {
	log := event.ObserverFunc(func(e event.Event) { fmt.Println(e) })
	log.Observe(event.Event{Kind: event.RetryScheduled, Pipeline: "db", Stage: "retry", Context: context.Background(),
		Attempt: 2, Delay: 120 * time.Millisecond, Reason: "timeout", Err: errors.New("dial tcp: connection refused")})
	log.Observe(event.Event{Kind: event.BreakerState, Pipeline: "db", Stage: "breaker", Source: "db",
		From: "closed", To: "open", Time: time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)})
	// Output:
	// retry_scheduled pipeline=db stage=retry attempt=2 delay=120ms reason=timeout err="dial tcp: connection refused"
	// breaker_state pipeline=db stage=breaker source=db from=closed to=open time=2026-03-01T12:00:00Z
}
