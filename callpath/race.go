package callpath

import (
	"context"
	"sync/atomic"
)

// Race decides which of a hedge's concurrent attempts wins: the first to claim it
// with [Win]. A hedge puts one in the context of each call's attempts
// ([WithRace]). When the call ends, it keeps the winner's context alive and cancels
// the others'. It is safe for concurrent use.
type Race struct{ winner atomic.Int64 }

type raceKey struct{}

// WithRace returns a copy of ctx carrying a new Race for the attempts made under it.
func WithRace(ctx context.Context) (context.Context, *Race) {
	r := new(Race)
	return withValue(ctx, raceKey{}, r), r
}

// Winner returns the attempt number that won, or 0 if none has claimed it yet.
func (r *Race) Winner() int { return int(r.winner.Load()) }

// Win reports whether the attempt running under ctx is the one whose result the
// call keeps. Under a hedge, the first attempt to ask wins. Every other must
// discard its result (close its response). Elsewhere, Win is always true. Some work
// has a result that outlives the call: an HTTP response, read after the call
// returns. Such work asks once it has a result it would keep, and only then.
func Win(ctx context.Context) bool {
	r, ok := ctx.Value(raceKey{}).(*Race)
	if !ok {
		return true
	}
	n, _, _ := Attempt(ctx)
	return r.winner.CompareAndSwap(0, int64(n)) || r.winner.Load() == int64(n)
}

// InRace reports whether ctx is the context of an attempt that may run at once
// with others of its call: a hedge's. Work that writes into memory the caller
// shares must then write into its own. It copies it over only if [Win] says so.
func InRace(ctx context.Context) bool {
	_, ok := ctx.Value(raceKey{}).(*Race)
	return ok
}
