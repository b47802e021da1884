package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/policy"
)

var (
	// ErrExceeded is matched by the error of a call whose overall deadline ([New])
	// ran out.
	ErrExceeded = errors.New("deadline: exceeded")
	// ErrAttemptTimeout is matched by the error of an attempt whose per-attempt
	// timeout ([PerAttempt]) ran out. The retry above may retry it.
	ErrAttemptTimeout = errors.New("deadline: attempt timed out")
	// ErrInvalidOptions is matched by the constructors' errors for a bad duration.
	ErrInvalidOptions = errors.New("deadline: invalid options")
)

// Deadline is a time limit: either the overall deadline of a call ([New], Kind
// Deadline) or the timeout of each attempt ([PerAttempt], Kind AttemptTimeout).
//
// A Deadline holds no state beyond its duration: it is safe for concurrent use and may
// be shared by any number of pipelines. The zero value is not usable; build one with a
// constructor.
type Deadline struct {
	limit      time.Duration
	perAttempt bool
}

// New returns an overall deadline of d: one context.WithTimeout per call, bounding
// every attempt and every sleep of a retry inside it (rule O1 keeps it outside the
// retry). d must be positive.
func New(d time.Duration) (*Deadline, error) {
	if d <= 0 {
		return nil, fmt.Errorf("%w: New(%v); want a duration > 0", ErrInvalidOptions, d)
	}
	return &Deadline{limit: d}, nil
}

// PerAttempt returns a timeout of d for each attempt. It stands inside a retry (rule
// O3), which sees a timed-out attempt as a transient failure it may retry. d must be
// positive.
func PerAttempt(d time.Duration) (*Deadline, error) {
	if d <= 0 {
		return nil, fmt.Errorf("%w: PerAttempt(%v); want a duration > 0", ErrInvalidOptions, d)
	}
	return &Deadline{limit: d, perAttempt: true}, nil
}

// Limit returns the deadline's duration.
func (d *Deadline) Limit() time.Duration { return d.limit }

// Kind returns policy.KindDeadline, or policy.KindAttemptTimeout for [PerAttempt].
func (d *Deadline) Kind() policy.Kind {
	if d.perAttempt {
		return policy.KindAttemptTimeout
	}
	return policy.KindDeadline
}

// Bind returns the Runner that applies the limit to every call.
func (d *Deadline) Bind(next policy.Runner, env policy.Env) policy.Runner {
	r := &runner{d: d, next: next, obs: env.Observer, pipeline: env.Pipeline, cause: ErrExceeded}
	if d.perAttempt {
		r.cause = ErrAttemptTimeout
	}
	return r
}

type runner struct {
	d        *Deadline
	next     policy.Runner
	obs      policy.Observer
	pipeline string
	cause    error
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	var start time.Time
	if r.obs != nil {
		start = time.Now()
	}
	tctx, cancel := context.WithTimeoutCause(ctx, r.d.limit, r.cause)
	err := r.next.Run(tctx, fn)
	// Our limit, not the caller's, ended the call if our context is done while the
	// caller's is not.
	if err != nil && tctx.Err() != nil && ctx.Err() == nil {
		err = &Error{Limit: r.d.limit, PerAttempt: r.d.perAttempt, Err: err}
		if r.obs != nil {
			now := time.Now()
			r.obs.Observe(policy.Event{
				Kind: policy.EventDeadlineExceeded, Pipeline: r.pipeline, Source: r.d.Kind().String(),
				Time: now, Elapsed: now.Sub(start), Err: err,
			})
		}
	}
	// Normally this cancels now; a caller that reads the result after the call (an
	// HTTP response body) holds the cancel until it is done, still under the limit.
	policy.DeferRelease(ctx, cancel)
	return err
}

// Error is returned when a [Deadline] ran out before the call (or attempt) ended. It
// matches context.DeadlineExceeded and either [ErrExceeded] (overall deadline) or
// [ErrAttemptTimeout] (per-attempt timeout), never context.Canceled, so a caller can
// tell it from its own cancellation. Unwrap gives what the stages below returned.
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
