package callpath

import (
	"context"
	"fmt"
	"strconv"
)

// A Pauser is told when a call stops using the server it runs in, and when it
// starts again. A retry waiting out its backoff holds a goroutine and nothing else.
// A server's shedder (shed.Middleware) puts itself in each admitted request's
// context. A handler whose retry sleeps before its next attempt then gives its
// concurrency slot back for the sleep. The package documentation says why.
//
// Implementers: Pause and Resume come in pairs, from the goroutine of the call.
// They are safe for concurrent use: many calls share one Pauser. Resume takes the
// slot back whatever the limit: the work was admitted.
type Pauser interface {
	Pause()
	Resume()
}

type pauserKey struct{}

// WithPauser returns a copy of ctx carrying p, for [Pause] to find.
func WithPauser(ctx context.Context, p Pauser) context.Context {
	return withValue(ctx, pauserKey{}, p)
}

// Pause tells the Pauser ctx carries, if any, that the call waits. It returns the
// function that tells it the call resumes; that is a no-op if ctx carries none. A
// retry calls it around its backoff:
//
//	resume := callpath.Pause(ctx)
//	<-timer
//	resume()
func Pause(ctx context.Context) (resume func()) {
	p, _ := ctx.Value(pauserKey{}).(Pauser)
	if p == nil {
		return noResume
	}
	p.Pause()
	return p.Resume
}

func noResume() {}

// PauseFor is [Pause] for a call that passes ctx on to work that may itself pause.
// That work may be a transport's whole round trip, retries and their backoff
// included. PauseFor pauses the Pauser ctx carries, if any. It returns a copy of ctx
// that carries none, so the slot is given back once. It also returns the [Paused]
// whose Resume takes the slot back:
//
//	ctx, paused := callpath.PauseFor(ctx)
//	defer paused.Resume()
func PauseFor(ctx context.Context) (context.Context, Paused) {
	p, _ := ctx.Value(pauserKey{}).(Pauser)
	if p == nil {
		return ctx, Paused{}
	}
	p.Pause()
	return withValue(ctx, pauserKey{}, Pauser(nil)), Paused{p}
}

// Paused is a call that [PauseFor] paused. It is a value, not a function. So
// pausing allocates no closure on the path of every call. The zero Paused has
// nothing to resume.
type Paused struct{ p Pauser }

// Resume tells the Pauser that PauseFor paused, if any, that the call resumes.
// Call it once.
func (p Paused) Resume() {
	if p.p != nil {
		p.p.Resume()
	}
}

// WithUpstreamPauser is [WithUpstreamAttempt] and [WithPauser] in one context
// value. It returns ctx marked as owned by a retry in another process on attempt
// n, and carrying p. A server's middleware gives it to the handler of a request
// from a retry owner upstream. It makes one allocation where the two would make
// two. Every lookup of a value further up has one link fewer.
func WithUpstreamPauser(ctx context.Context, n int, p Pauser) context.Context {
	return &upstreamCtx{Context: ctx, owner: mark(n, true), p: p}
}

// upstreamCtx carries an upstream attempt's mark and a Pauser, as two
// context.WithValue would. Everything else is its parent's, the cancellation too.
// Contexts derived from it register with its parent's, as through contexts of
// package context.
type upstreamCtx struct {
	context.Context
	owner *ownership
	p     Pauser
}

func (c *upstreamCtx) Value(key any) any {
	switch key {
	case any(ownerKey{}):
		return c.owner
	case any(pauserKey{}):
		return c.p
	}
	return c.Context.Value(key)
}

// AfterFunc runs f once c is done: once its parent is (see valueCtx).
func (c *upstreamCtx) AfterFunc(f func()) (stop func() bool) { return afterFunc(c.Context, f) }

func (c *upstreamCtx) String() string {
	return fmt.Sprint(c.Context) + ".WithUpstreamPauser(" + strconv.Itoa(c.owner.attempt) + ")"
}
