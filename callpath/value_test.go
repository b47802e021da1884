package callpath_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/backstop-go/backstop/callpath"
)

// foreignCtx is a request context of another package, as a server's or a simulator's
// own may be: package context cannot see its cancellation, only its AfterFunc method,
// whose calls it counts.
type foreignCtx struct {
	done       context.Context
	afterFuncs int
}

func (c *foreignCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *foreignCtx) Done() <-chan struct{}       { return c.done.Done() }
func (c *foreignCtx) Err() error                  { return c.done.Err() }
func (c *foreignCtx) Value(any) any               { return nil }
func (c *foreignCtx) AfterFunc(f func()) func() bool {
	c.afterFuncs++
	return context.AfterFunc(c.done, f)
}

// TestValues_PassOnAfterFunc: a context derived under the values of this package
// registers with a foreign parent's AfterFunc, as it would directly under it, and
// starts no goroutine to wait on the parent's Done; the parent's end still ends it.
func TestValues_PassOnAfterFunc(t *testing.T) {
	done, end := context.WithCancel(context.Background())
	parent := &foreignCtx{done: done}
	ctx := callpath.WithPauser(parent, &pauseCount{})
	ctx, paused := callpath.PauseFor(ctx)
	defer paused.Resume()
	ctx, rel := callpath.WithReleaser(ctx)
	defer rel.Release()
	ctx = callpath.WithUpstreamPauser(ctx, 2, &pauseCount{})
	ctx = callpath.WithAttempt(ctx, 1)
	ctx = callpath.WithoutRepeats(ctx)
	ctx, _ = callpath.WithRace(ctx)
	before := runtime.NumGoroutine()
	child, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	if got := runtime.NumGoroutine(); got != before {
		t.Errorf("context.WithTimeout under the values: %d goroutines, %d before; want none started", got, before)
	}
	if parent.afterFuncs != 1 {
		t.Errorf("context.WithTimeout under the values: the parent's AfterFunc called %d times; want 1", parent.afterFuncs)
	}
	end()
	<-child.Done()
	if err := child.Err(); err != context.Canceled {
		t.Errorf("child.Err() = %v once the parent ended; want context.Canceled", err)
	}
}
