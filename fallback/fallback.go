package fallback

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// What answered a call, the To of its event.Fallback.
const (
	FromValue    = "value"     // Options.Value
	FromFunc     = "func"      // Options.Func
	FromLastGood = "last_good" // the last good value (Options.LastGood)
)

// ErrInvalidOptions is matched by New's errors for bad options.
var ErrInvalidOptions = errors.New("fallback: invalid options")

// Options configure a [Fallback]. The zero value answers every failure
// [DefaultHandle] lets through with T's zero value.
type Options[T any] struct {
	// Name names the fallback in events and metrics. Required.
	Name string
	// Value is the answer when Func is nil and no last good value is at hand.
	Value T
	// Func, if not nil, works the answer out from the failure, in place of Value.
	// Its ctx is the call's; err is the failure. If Func fails too, the call
	// returns an [*Error] holding both failures.
	Func func(ctx context.Context, err error) (T, error)
	// LastGood, if > 0, answers with the last value a call through [Fallback.Get]
	// returned, while it is younger than LastGood. Before the first, and once it is
	// older, Func or Value answers. It is ≥ 0. 0 means no last good value is kept.
	LastGood time.Duration
	// Handle says which failures the fallback answers. Its ctx is the caller's
	// context, as the fallback runs under it. Nil means [DefaultHandle].
	Handle func(ctx context.Context, err error) bool
	// Clock ages the last good value; nil means clock.System().
	Clock clock.Clock
}

// Fallback answers failed calls (policy.KindFallback). It is safe for concurrent
// use. Build it with [New]. Run calls through the pipeline that holds it with
// [Fallback.Get].
type Fallback[T any] struct {
	name     string
	o        Options[T]
	handle   func(context.Context, error) bool
	clock    clock.Clock
	last     atomic.Pointer[good[T]]
	answered atomic.Uint64
}

// good is a value a call returned, and when.
type good[T any] struct {
	v  T
	at time.Time
}

// New returns a fallback named o.Name; the name labels its events and series. Or
// it returns an error matching ErrInvalidOptions naming the bad field.
func New[T any](o Options[T]) (*Fallback[T], error) {
	name := o.Name
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: name is empty; want the dependency's name", ErrInvalidOptions)
	case o.LastGood < 0:
		return nil, fmt.Errorf("%w: %s: LastGood is %v; want ≥ 0 (0: keep no last good value)", ErrInvalidOptions, name, o.LastGood)
	}
	h := o.Handle
	if h == nil {
		h = DefaultHandle
	}
	return &Fallback[T]{name: name, o: o, handle: h, clock: clock.Or(o.Clock)}, nil
}

// DefaultHandle is Options.Handle's default. It answers err unless ctx is done:
// the caller has gone. Nor does it answer a failure that a retry owner may retry,
// when ctx runs under that owner further up the call path. See the package
// documentation.
func DefaultHandle(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return !callpath.Owned(ctx) || !ownerMayRetry(err)
}

// ownerMayRetry reports whether a retry owner with the default classifier may
// retry err. Such an error is no refusal and no permanent error. It is marked
// retryable, or is a timeout. Or it is a refused, reset or aborted connection, or
// a broken pipe.
func ownerMayRetry(err error) bool {
	if errors.Is(err, policy.ErrRejected) || errors.Is(err, context.Canceled) {
		return false
	}
	m := fault.Of(err)
	if m.Permanent || m.Stop {
		return false
	}
	if m.Retryable {
		return true
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// Name returns the fallback's name.
func (f *Fallback[T]) Name() string { return f.name }

// Placement: a fallback encloses the stages whose failures it answers.
func (f *Fallback[T]) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Encloses: true}
}

// Answered returns how many failed calls the fallback has answered so far.
func (f *Fallback[T]) Answered() uint64 { return f.answered.Load() }

// Get runs fn under p, which must hold f, and returns fn's value. If fn failed and
// the fallback answered, it returns the fallback's answer. Otherwise it returns T's
// zero value and the error. It allocates two small objects per call: the call's
// context and its Func. (policy.Get allocates one.) With Options.LastGood, a call
// that succeeds reads the clock. It allocates a third object, the value kept.
func (f *Fallback[T]) Get(ctx context.Context, p *policy.Pipeline, fn func(context.Context) (T, error)) (T, error) {
	c := &call[T]{Context: ctx, f: f}
	err := p.Do(c, c.bind(fn))
	if err != nil {
		var zero T
		return zero, err
	}
	if c.from == "" && f.o.LastGood > 0 {
		f.last.Store(&good[T]{v: c.v, at: f.clock.Now()})
	}
	return c.v, nil
}

// call is the context of one Get. It carries, to the fallback's Runner, where to
// put the answer.
type call[T any] struct {
	context.Context
	f    *Fallback[T]
	fn   func(context.Context) (T, error)
	v    T
	from string // what answered; "" if fn's value
}

// Value returns c itself for the key f, so the fallback's Runner finds the call.
func (c *call[T]) Value(key any) any {
	if key == any(c.f) {
		return c
	}
	return c.Context.Value(key)
}

func (c *call[T]) bind(fn func(context.Context) (T, error)) policy.Func {
	c.fn = fn
	return c.run
}

func (c *call[T]) run(ctx context.Context) error {
	v, err := c.fn(ctx)
	if err == nil && callpath.Win(ctx) { // under a hedge, only the winning attempt's value is kept
		c.v = v
	}
	return err
}

// Bind returns the Runner that answers the failures of the stages below.
func (f *Fallback[T]) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return &runner[T]{f: f, next: next, obs: env.Observer, pipeline: env.Pipeline,
		needs: event.NeedsOf(env.Observer, event.Fallback)}
}

type runner[T any] struct {
	f        *Fallback[T]
	next     policy.Runner
	obs      event.Observer
	pipeline string
	needs    event.Needs
}

func (r *runner[T]) Run(ctx context.Context, fn policy.Func) error {
	err := r.next.Run(ctx, fn)
	if err == nil {
		return nil
	}
	f := r.f
	c, _ := ctx.Value(f).(*call[T])
	if c == nil || !f.handle(ctx, err) {
		return err // no Get to hand a value to, or a failure it leaves alone
	}
	v, from, ferr := f.answer(ctx, err)
	if ferr != nil {
		return &Error{Name: f.name, Err: err, Fallback: ferr}
	}
	c.v, c.from = v, from
	f.answered.Add(1)
	if r.needs != event.NeedsNothing {
		r.obs.Observe(event.Event{Kind: event.Fallback, Pipeline: r.pipeline, Stage: Kind, Source: f.name,
			Time: clock.StartStopwatch(f.clock, r.needs).Started(), Reason: policy.Outcome(err), To: from, Err: err, Context: ctx})
	}
	return nil
}

// answer works out the answer to a call that failed with err.
func (f *Fallback[T]) answer(ctx context.Context, err error) (T, string, error) {
	if f.o.LastGood > 0 {
		if g := f.last.Load(); g != nil && f.clock.Now().Sub(g.at) < f.o.LastGood {
			return g.v, FromLastGood, nil
		}
	}
	if f.o.Func != nil {
		v, ferr := f.o.Func(ctx, err)
		return v, FromFunc, ferr
	}
	return f.o.Value, FromValue, nil
}

// ExplainStage implements policy.StageExplainer.
func (f *Fallback[T]) ExplainStage() policy.Stage {
	with := "a fixed value"
	switch v := fmt.Sprintf("%+v", f.o.Value); {
	case reflect.ValueOf(&f.o.Value).Elem().IsZero():
		with = fmt.Sprintf("the zero %T", f.o.Value)
	case len(v) <= 40:
		with = fmt.Sprintf("a fixed value (%s)", v)
	}
	if f.o.Func != nil {
		with = "the value its function works out from the failure"
	}
	if f.o.LastGood > 0 {
		with = fmt.Sprintf("the last good value while younger than %v, else %s", f.o.LastGood, with)
	}
	which := "the failures its Handle picks"
	if f.o.Handle == nil {
		which = "every failure, refusals and the deadline included, except when the caller has gone, or when a retry owner further up may retry it"
	}
	return policy.Stage{
		Summary: fmt.Sprintf("fallback %q: answers a failed call with %s; it answers %s", f.name, with, which),
	}
}

// Error is the failure of a call whose fallback failed too: Options.Func returned
// an error. errors.Is and errors.As find either failure in it.
type Error struct {
	Name     string // the fallback's
	Err      error  // the call's failure
	Fallback error  // the fallback's
}

func (e *Error) Error() string {
	return "fallback: " + e.Name + ": the fallback failed (" + e.Fallback.Error() + ") after the call failed: " + e.Err.Error()
}

// Unwrap returns both failures, the call's first.
func (e *Error) Unwrap() []error { return []error{e.Err, e.Fallback} }
