package callpath_test

import (
	"context"
	"testing"

	"github.com/backstop-go/backstop/callpath"
)

type pauseCount struct{ paused, resumed int }

func (p *pauseCount) Pause()  { p.paused++ }
func (p *pauseCount) Resume() { p.resumed++ }

// TestPauseFor_GivesTheSlotBackOnce: a round trip that pauses its context (Paused) and
// a retry's backoff within it (Pause on the context it was handed) pause the Pauser
// once, and resume it once; without a Pauser both do nothing.
func TestPauseFor_GivesTheSlotBackOnce(t *testing.T) {
	p := &pauseCount{}
	ctx, resume := callpath.PauseFor(callpath.WithPauser(context.Background(), p))
	inner := callpath.Pause(ctx) // the backoff of a retry inside the round trip
	inner()
	resume()
	if p.paused != 1 || p.resumed != 1 {
		t.Fatalf("PauseFor then Pause within it: paused %d, resumed %d; want 1 and 1", p.paused, p.resumed)
	}
	again := callpath.Pause(callpath.WithPauser(context.Background(), p))
	again()
	if p.paused != 2 || p.resumed != 2 {
		t.Fatalf("Pause: paused %d, resumed %d; want 2 and 2", p.paused, p.resumed)
	}
	bare, resume := callpath.PauseFor(context.Background())
	resume()
	callpath.Pause(bare)()
}
