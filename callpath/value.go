package callpath

import (
	"context"
	"fmt"
)

// The contexts of this package carry values and nothing else. Each is done exactly
// when its parent is. Contexts derived from them find their parent's cancellation
// as through contexts of package context. A cancel context of package context below
// is found by its key, which Value passes on. They also pass on a parent's
// AfterFunc method. Package context uses it for a parent of another package: a
// server's or a simulator's own request context. A context derived under a value
// of this package then registers with that parent's AfterFunc. It does so as it
// would directly under it, instead of starting a goroutine to wait on its Done.

// afterFuncer is the method package context looks for on a parent it cannot see into.
type afterFuncer interface {
	AfterFunc(func()) (stop func() bool)
}

// afterFunc arranges for f to run once parent is done, as context.AfterFunc does.
// It uses parent's own AfterFunc if it has one.
func afterFunc(parent context.Context, f func()) (stop func() bool) {
	if a, ok := parent.(afterFuncer); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(parent, f)
}

// valueCtx carries one value, as context.WithValue's context does. It passes on
// its parent's AfterFunc.
type valueCtx struct {
	context.Context
	key, val any
}

// withValue is context.WithValue for the keys of this package.
func withValue(parent context.Context, key, val any) context.Context {
	return &valueCtx{Context: parent, key: key, val: val}
}

func (c *valueCtx) Value(key any) any {
	if key == c.key {
		return c.val
	}
	return c.Context.Value(key)
}

// AfterFunc runs f once c is done: once its parent is.
func (c *valueCtx) AfterFunc(f func()) (stop func() bool) { return afterFunc(c.Context, f) }

func (c *valueCtx) String() string {
	return fmt.Sprintf("%v.WithValue(%T, %v)", c.Context, c.key, c.val)
}
