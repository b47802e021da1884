package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/event"

	"github.com/backstop-go/backstop/policy"
)

var (
	// ErrExceeded is matched by the error of a call whose overall deadline ([New])
	// ran out.
	ErrExceeded = errors.New("deadline: exceeded")
	// ErrAttemptTimeout is matched by the error of an attempt whose per-attempt
	// timeout ([NewPerAttempt]) ran out. The retry above may retry it.
	ErrAttemptTimeout = errors.New("deadline: attempt timed out")
	// ErrInvalidOptions is matched by the constructors' errors for a bad duration.
	ErrInvalidOptions = errors.New("deadline: invalid options")
)

// Deadline is a time limit. It is either the overall deadline of a call ([New],
// kind "deadline"), or the timeout of each attempt ([NewPerAttempt], kind
// "attempt_timeout").
//
// A Deadline holds no state beyond its duration. It is safe for concurrent use,
// and may be shared by any number of pipelines. The zero value is not usable;
// build one with a constructor.
type Deadline struct {
	limit      time.Duration
	perAttempt bool
}

// Options configure a [Deadline].
type Options struct {
	// Timeout is the limit: of the whole call for [New], of each attempt for
	// [NewPerAttempt]. Required, > 0.
	Timeout time.Duration
}

// New returns an overall deadline: one context.WithTimeout per call. It bounds
// every attempt and every sleep of a retry inside it. Rule O1 keeps it outside the
// retry. It sets no timer if it could never fire first (see the package doc).
func New(o Options) (*Deadline, error) {
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("%w: Options.Timeout is %v; want a duration > 0", ErrInvalidOptions, o.Timeout)
	}
	return &Deadline{limit: o.Timeout}, nil
}

// NewPerAttempt returns a timeout for each attempt. It stands inside a retry (rule
// O3). The retry sees a timed-out attempt as a transient failure it may retry.
func NewPerAttempt(o Options) (*Deadline, error) {
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("%w: Options.Timeout is %v; want a duration > 0", ErrInvalidOptions, o.Timeout)
	}
	return &Deadline{limit: o.Timeout, perAttempt: true}, nil
}

// Limit returns the deadline's duration.
func (d *Deadline) Limit() time.Duration { return d.limit }

// Placement returns the overall deadline's. For [NewPerAttempt], it returns a
// per-attempt timeout's.
func (d *Deadline) Placement() policy.Placement {
	if d.perAttempt {
		return policy.Placement{Kind: KindAttempt, Retry: policy.InsideRetry}
	}
	return policy.Placement{Kind: Kind, Deadline: true, Retry: policy.OutsideRetry}
}

// Bind returns the Runner that applies the limit to every call.
func (d *Deadline) Bind(next policy.Runner, env policy.Env) policy.Runner {
	r := &runner{d: d, limit: d.limit, next: next, obs: env.Observer, pipeline: env.Pipeline, cause: ErrExceeded,
		kind:  d.Placement().Kind,
		needs: event.NeedsOf(env.Observer, event.DeadlineExceeded)}
	if d.perAttempt {
		r.cause = ErrAttemptTimeout
	} else {
		r.bounded = env.AttemptTimeout > 0 && env.AttemptTimeout < d.limit
	}
	return r
}

type runner struct {
	// What every call reads comes first, with d's limit copied here. A process may
	// have many pipelines. A call then finds few of them in the cache.
	limit time.Duration // d.limit
	next  policy.Runner
	needs event.Needs // what obs reads of deadline events
	// bounded: a shorter per-attempt timeout inside bounds a call that makes one
	// attempt. See policy.Env.AttemptTimeout.
	bounded bool

	d        *Deadline
	obs      event.Observer
	pipeline string
	kind     string // Kind or KindAttempt: the events' Stage and Source
	cause    error
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	now := time.Now()
	mine := now.Add(r.limit)
	if dl, ok := ctx.Deadline(); ok && !dl.After(mine) {
		// The caller's deadline comes first: ours could never fire. A context of our
		// own would buy nothing, at four allocations and a timer.
		return r.next.Run(ctx, fn)
	}
	var w clock.Stopwatch
	if r.needs != event.NeedsNothing {
		w = clock.StartStopwatch(clock.System(), r.needs)
	}
	if r.bounded && callpath.Owned(ctx) {
		// The call makes one attempt: an owner elsewhere on the call path retries.
		// The per-attempt timeout inside ends it before our limit could. It ends the
		// reading of its result too. Our timer would never fire, and the call needs
		// no context of ours. Its outcome is judged as it would be under one.
		err := r.next.Run(ctx, fn)
		if err != nil && r.ours(ctx, nil, mine, err) {
			err = r.exceeded(ctx, err, &w)
		}
		return err
	}
	tctx, cancel := context.WithDeadlineCause(ctx, mine, r.cause)
	err := r.next.Run(tctx, fn)
	if err != nil && r.ours(ctx, tctx, mine, err) {
		err = r.exceeded(ctx, err, &w)
	}
	// Normally this cancels now. A caller may read the result after the call: an
	// HTTP response body. It holds the cancel until it is done, still under the
	// limit.
	callpath.DeferRelease(ctx, cancel)
	return err
}

// exceeded returns err as this stage's Error, and reports it.
func (r *runner) exceeded(ctx context.Context, err error, w *clock.Stopwatch) error {
	err = &Error{Limit: r.d.limit, PerAttempt: r.d.perAttempt, Err: err}
	if r.needs != event.NeedsNothing {
		e := event.Event{Kind: event.DeadlineExceeded, Pipeline: r.pipeline, Stage: r.kind, Source: r.kind, Err: err, Context: ctx}
		e.Time, e.Elapsed = w.Stop()
		r.obs.Observe(e)
	}
	return err
}

// ours reports whether err says that this stage's limit, not the caller's, ended
// the call. It does when:
//   - the caller's ctx is still live;
//   - err is a timeout;
//   - either our timer fired, or err is a context.DeadlineExceeded under a
//     deadline that is ours, mine.
//
// The latter is a retry below that gave up because no attempt could finish in the
// time left. An attempt's own timeout does not count: it says nothing of our limit
// (see spentTime). When our timer fired, err may also be the context's cause,
// ErrExceeded or ErrAttemptTimeout itself. The net/http transport, for one,
// returns context.Cause of a request whose context ended. An unrelated error
// returned just as the timer fired keeps its own meaning. The argument tctx is our
// context, nil if the call ran without one.
func (r *runner) ours(ctx, tctx context.Context, mine time.Time, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if tctx != nil && tctx.Err() != nil {
		return isTimeout(err) || errors.Is(err, r.cause)
	}
	if !spentTime(err) {
		return false
	}
	theirs, ok := ctx.Deadline()
	return !ok || mine.Before(theirs)
}

// spentTime reports whether err matches context.DeadlineExceeded other than
// through a per-attempt timeout's Error. A retry that gave up because the time
// left could not hold another attempt does. One that ran out of attempts, the
// last of which timed out, does not. Its call ended with time to spare.
func spentTime(err error) bool {
	for err != nil {
		if e, ok := err.(*Error); ok && e.PerAttempt {
			return false
		}
		if err == context.DeadlineExceeded {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(context.DeadlineExceeded) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if spentTime(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// isTimeout reports whether err is a context.DeadlineExceeded, or says it is a
// timeout. It says so with a Timeout() bool method returning true, as net.Error
// has.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Error is returned when a [Deadline] ran out before the call (or attempt) ended.
// It matches context.DeadlineExceeded. It also matches either [ErrExceeded]
// (overall deadline) or [ErrAttemptTimeout] (per-attempt timeout). It never
// matches context.Canceled, so a caller can tell it from its own cancellation.
// Unwrap gives what the stages below returned.
type Error struct {
	Limit      time.Duration
	PerAttempt bool
	Err        error
}

func (e *Error) Error() string {
	what := "deadline: exceeded"
	if e.PerAttempt {
		what = "deadline: attempt timed out"
	}
	if e.Err == nil || e.Err == context.DeadlineExceeded {
		return fmt.Sprintf("%s after %v", what, e.Limit)
	}
	return fmt.Sprintf("%s after %v: %v", what, e.Limit, e.Err)
}

// Unwrap returns the error the stages below returned.
func (e *Error) Unwrap() error { return e.Err }

// Is matches context.DeadlineExceeded, and ErrExceeded or ErrAttemptTimeout as fits.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return true
	case ErrExceeded:
		return !e.PerAttempt
	case ErrAttemptTimeout:
		return e.PerAttempt
	}
	return false
}

// Timeout reports true, as net.Error does for timeouts.
func (e *Error) Timeout() bool { return true }

// ExplainStage implements policy.StageExplainer.
func (d *Deadline) ExplainStage() policy.Stage {
	if d.perAttempt {
		return policy.Stage{Limit: d.limit,
			Summary: fmt.Sprintf("each attempt ends after %v; the retry above may retry a timed-out attempt", d.limit)}
	}
	return policy.Stage{Limit: d.limit,
		Summary: fmt.Sprintf("the whole call, every attempt and sleep included, ends after %v (deadline.ErrExceeded)", d.limit)}
}
