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
	ctx, paused := callpath.PauseFor(callpath.WithPauser(context.Background(), p))
	inner := callpath.Pause(ctx) // the backoff of a retry inside the round trip
	inner()
	paused.Resume()
	if p.paused != 1 || p.resumed != 1 {
		t.Fatalf("PauseFor then Pause within it: paused %d, resumed %d; want 1 and 1", p.paused, p.resumed)
	}
	again := callpath.Pause(callpath.WithPauser(context.Background(), p))
	again()
	if p.paused != 2 || p.resumed != 2 {
		t.Fatalf("Pause: paused %d, resumed %d; want 2 and 2", p.paused, p.resumed)
	}
	bare, paused := callpath.PauseFor(context.Background())
	paused.Resume()
	callpath.Pause(bare)()
}

// TestWithUpstreamPauser_CarriesBoth: the one context value answers as
// WithUpstreamAttempt and WithPauser would, and passes every other key and the
// cancellation on to its parent.
func TestWithUpstreamPauser_CarriesBoth(t *testing.T) {
	type key struct{}
	p := &pauseCount{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	ctx := callpath.WithUpstreamPauser(parent, 3, p)
	if n, upstream, ok := callpath.Attempt(ctx); n != 3 || !upstream || !ok {
		t.Errorf("callpath.Attempt = %d, %v, %v; want 3, true, true", n, upstream, ok)
	}
	if n, ok := callpath.Outgoing(ctx); n != 1 || !ok {
		t.Errorf("callpath.Outgoing = %d, %v; want 1, true", n, ok)
	}
	callpath.Pause(ctx)()
	if p.paused != 1 || p.resumed != 1 {
		t.Errorf("Pause: paused %d, resumed %d; want 1 and 1", p.paused, p.resumed)
	}
	if v := ctx.Value(key{}); v != "v" {
		t.Errorf("ctx.Value(parent's key) = %v; want v", v)
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	<-child.Done() // the child registered with the parent's cancellation
}
