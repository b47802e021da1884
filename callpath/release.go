package callpath

import (
	"context"
	"fmt"
	"sync"
)

// Releaser holds the cancel functions of stages whose context must outlive the
// call. The call's result is read after it returns. An HTTP response body, say, is
// read under the deadline that bounded the request. Package policyhttp puts a
// Releaser in the request's context. It releases it when the body is closed.
//
// A Releaser is safe for concurrent use. The zero value is ready to use.
type Releaser struct {
	mu   sync.Mutex // guards fns, first and done
	fns  []func()
	done bool
	// first holds the first functions handed over. Thus a call with an overall
	// deadline and a per-attempt timeout allocates nothing more for them.
	first [2]func()
}

type releaserKey struct{}

// WithReleaser returns a copy of ctx carrying a new Releaser, and the Releaser.
// The caller must call Release once the call's result is no longer used. The
// context and the Releaser are one allocation.
func WithReleaser(ctx context.Context) (context.Context, *Releaser) {
	c := &releaserCtx{Context: ctx}
	return c, &c.r
}

// releaserCtx is a context carrying a Releaser, as context.WithValue would, in one
// object. Everything but the Releaser's key is its parent's, the cancellation too.
// Contexts derived from it register with its parent's, as through a context of
// package context.
type releaserCtx struct {
	context.Context
	r Releaser
}

func (c *releaserCtx) Value(key any) any {
	if key == any(releaserKey{}) {
		return &c.r
	}
	return c.Context.Value(key)
}

// AfterFunc runs f once c is done: once its parent is (see valueCtx).
func (c *releaserCtx) AfterFunc(f func()) (stop func() bool) { return afterFunc(c.Context, f) }

func (c *releaserCtx) String() string { return fmt.Sprint(c.Context) + ".WithReleaser" }

// DeferRelease hands fn to the Releaser ctx carries, to be called on Release. It
// calls fn now if ctx carries none, or if it was released already. Stages that
// create contexts (a deadline) call it instead of cancelling at the end of Run.
func DeferRelease(ctx context.Context, fn func()) {
	r, _ := ctx.Value(releaserKey{}).(*Releaser)
	if r == nil {
		fn()
		return
	}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		fn()
		return
	}
	if r.fns == nil {
		r.fns = r.first[:0]
	}
	r.fns = append(r.fns, fn)
	r.mu.Unlock()
}

// Release calls every held function, innermost first, once. Later DeferRelease
// calls on the same Releaser run at once.
func (r *Releaser) Release() {
	r.mu.Lock()
	fns := r.fns
	r.fns, r.done = nil, true
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
		fns[i] = nil // done: first keeps nothing alive
	}
}
