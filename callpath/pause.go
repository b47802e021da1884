package callpath

import "context"

// A Pauser is told when a call stops using the server it runs in, and when it starts
// again: a retry waiting out its backoff holds a goroutine and nothing else. A server's
// shedder (shed.Middleware) puts itself in each admitted request's context, so that a
// handler whose retry sleeps before its next attempt gives its concurrency slot back
// for the sleep — otherwise, while a dependency is down, the sleeps of a retry owner
// fill the server's limit and it refuses new work it could serve, and keeps refusing
// until they end after the dependency has returned.
//
// Implementers: Pause and Resume come in pairs, from the goroutine of the call, and are
// safe for concurrent use (many calls share one Pauser). Resume takes the slot back
// whatever the limit: the work was admitted.
type Pauser interface {
	Pause()
	Resume()
}

type pauserKey struct{}

// WithPauser returns a copy of ctx carrying p, for [Pause] to find.
func WithPauser(ctx context.Context, p Pauser) context.Context {
	return context.WithValue(ctx, pauserKey{}, p)
}

// Pause tells the Pauser ctx carries, if any, that the call waits, and returns the
// function that tells it the call resumes (a no-op if ctx carries none). A retry
// calls it around its backoff:
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

// PauseFor is [Pause] for a call that passes ctx on to work that may itself pause (a
// transport's whole round trip, retries and their backoff included): it pauses the
// Pauser ctx carries, if any, and returns a copy of ctx that carries none, so the slot
// is given back once, and the function that takes it back.
func PauseFor(ctx context.Context) (context.Context, func()) {
	p, _ := ctx.Value(pauserKey{}).(Pauser)
	if p == nil {
		return ctx, noResume
	}
	p.Pause()
	return context.WithValue(ctx, pauserKey{}, Pauser(nil)), p.Resume
}
