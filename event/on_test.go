package event_test

import (
	"testing"

	"github.com/backstop-go/backstop/event"
)

// TestOn_HandsOnlyTheKindsAskedFor: the hook sees its kinds alone, and tells stages
// it reads nothing of the others.
func TestOn_HandsOnlyTheKindsAskedFor(t *testing.T) {
	var got []event.Kind
	o := event.On(func(e event.Event) { got = append(got, e.Kind) }, event.RetryScheduled, event.BreakerState)
	for _, k := range []event.Kind{event.CallStart, event.RetryScheduled, event.AttemptEnd, event.BreakerState} {
		o.Observe(event.Event{Kind: k})
	}
	if len(got) != 2 || got[0] != event.RetryScheduled || got[1] != event.BreakerState {
		t.Errorf("the hook saw %v; want [retry_scheduled breaker_state]", got)
	}
	if n := event.NeedsOf(o, event.AttemptEnd); n != event.NeedsNothing {
		t.Errorf("NeedsOf(hook, attempt_end) = %v; want NeedsNothing", n)
	}
	if n := event.NeedsOf(o, event.RetryScheduled); n != event.NeedsTiming {
		t.Errorf("NeedsOf(hook, retry_scheduled) = %v; want NeedsTiming", n)
	}
}
