package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

type panicEvents chan event.Event

func (c panicEvents) Observe(e event.Event) { c <- e }

// TestBackground_APanicInASyncIsReportedAndTheSyncsGoOn: a sync that panics (an
// observer it calls, say) is reported as an EventPanic with the panic's value, and the
// background goroutine goes on syncing: the process is not killed.
func TestBackground_APanicInASyncIsReportedAndTheSyncsGoOn(t *testing.T) {
	events := make(panicEvents, 16)
	s := &Store{interval: time.Millisecond, obs: events}
	synced := make(chan struct{}, 16)
	calls := 0
	var b background
	b.start(s, nil, func(bool) {
		calls++
		if calls == 1 {
			panic("sync bug")
		}
		select {
		case synced <- struct{}{}:
		default:
		}
	})
	e := <-events
	<-synced // a later sync ran: the goroutine survived
	_ = b.stop()
	var pe *policy.PanicError
	if e.Kind != event.Panic || e.Source != "fleet" || !errors.As(e.Err, &pe) || pe.Value != "sync bug" {
		t.Fatalf("event %+v; want EventPanic from fleet carrying the panic's value", e)
	}
}
