package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"

	"golang.org/x/time/rate"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// Mode says what a call that finds no token does.
type Mode uint8

// The modes. The zero Mode is Wait.
const (
	Wait   Mode = iota // wait for a token, never past the deadline nor MaxWait
	Refuse             // be refused at once
)

func (m Mode) String() string {
	switch m {
	case Wait:
		return "wait"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// The reasons a limiter gives in its policy.RejectError and its event.Rejected.
// A call that waited and went through is reported as an event.Waited.
const (
	ReasonNoToken   = "no_token"   // Refuse mode: no token now
	ReasonDeadline  = "deadline"   // Wait mode: the token would come after the call's deadline
	ReasonWaitLimit = "wait_limit" // Wait mode: the token would come after MaxWait
)

var (
	// ErrLimited is matched by every refusal of a rate limiter. A refusal is a
	// *policy.RejectError whose Err is ErrLimited. It matches policy.ErrRejected
	// too.
	ErrLimited = errors.New("ratelimit: limited")
	// ErrInvalidOptions is matched by New's and Registry.Get's errors for bad
	// options.
	ErrInvalidOptions = errors.New("ratelimit: invalid options")
)

// Options configure a [Limiter]. Rate is required.
type Options struct {
	// Name names the rate limiter in events, metrics and errors. Required.
	Name string
	// Rate is how many calls (attempts, inside a retry) a second go through, on
	// average. It is > 0 and finite.
	Rate float64
	// Burst is how many may go through at once after a quiet spell, ≥ 1. 0 means
	// one second's worth: ⌈Rate⌉, at least 1.
	Burst int
	// Mode is what a call that finds no token does: Wait (the zero value) or Refuse.
	Mode Mode
	// MaxWait is, in Wait mode, the longest a call waits for its token, ≥ 0. 0
	// means as long as its context's deadline allows. A call never waits past its
	// deadline.
	MaxWait time.Duration
	// Clock reads the time and times waits; nil means clock.System().
	Clock clock.Clock
}

// Limiter is a client-side rate limiter; its kind is [Kind]. It is safe for
// concurrent use. Every pipeline it is bound into shares its bucket. Build it with
// [New], or get one shared by name from a [Registry]. The zero value is not
// usable.
type Limiter struct {
	name    string
	o       Options // as resolved by New
	lim     *rate.Limiter
	clock   clock.Clock
	refused atomic.Uint64
	waited  atomic.Uint64
}

// New returns a limiter named o.Name; the name labels its refusals, events and
// series. Or it returns an error matching ErrInvalidOptions naming the bad field.
func New(o Options) (*Limiter, error) {
	name := o.Name
	o, err := resolve(name, o)
	if err != nil {
		return nil, err
	}
	clock := clock.Or(o.Clock)
	return &Limiter{name: name, o: o, lim: rate.NewLimiter(rate.Limit(o.Rate), o.Burst), clock: clock}, nil
}

func resolve(name string, o Options) (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidOptions, name}, args...)...)
	}
	switch {
	case name == "":
		return bad("name is empty; want the dependency's name")
	case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
		return bad("Rate is %v; want a finite number of calls a second > 0", o.Rate)
	case o.Burst < 0:
		return bad("Burst is %d; want ≥ 1, or 0 for one second's worth", o.Burst)
	case o.Mode > Refuse:
		return bad("Mode is %v; want ratelimit.Wait or ratelimit.Refuse", o.Mode)
	case o.MaxWait < 0:
		return bad("MaxWait is %v; want ≥ 0 (0: as long as the call's deadline allows)", o.MaxWait)
	case o.Mode == Refuse && o.MaxWait != 0:
		return bad("MaxWait is %v in Refuse mode, where no call waits; want 0", o.MaxWait)
	}
	if o.Burst == 0 {
		o.Burst = max(1, int(math.Min(math.Ceil(o.Rate), math.MaxInt32)))
	}
	return o, nil
}

// Name returns the limiter's name.
func (l *Limiter) Name() string { return l.name }

// Placement: a rate limiter may wait for a token, so it is not prompt.
func (l *Limiter) Placement() policy.Placement { return policy.Placement{Kind: Kind} }

// Tokens returns the tokens in the bucket now. It is below 0 while calls wait for
// theirs.
func (l *Limiter) Tokens() float64 { return l.lim.TokensAt(l.clock.Now()) }

var _ policy.Publisher = (*Limiter)(nil)

// Gauges implements policy.Publisher: the tokens in the bucket.
func (l *Limiter) Gauges() []policy.Gauge {
	return []policy.Gauge{
		{Name: "tokens", Help: "Tokens in a rate limiter's bucket; below 0 while calls wait for theirs.",
			Value: l.Tokens},
	}
}

// Refused returns how many calls the limiter has refused so far.
func (l *Limiter) Refused() uint64 { return l.refused.Load() }

// Waited returns how many calls have waited for their token and gone through.
func (l *Limiter) Waited() uint64 { return l.waited.Load() }

// Bind returns the Runner that takes a token for each call (or attempt, inside a
// retry).
func (l *Limiter) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return &runner{l: l, next: next, obs: env.Observer, pipeline: env.Pipeline,
		rejected: event.NeedsOf(env.Observer, event.Rejected),
		waited:   event.NeedsOf(env.Observer, event.Waited)}
}

type runner struct {
	l        *Limiter
	next     policy.Runner
	obs      event.Observer
	pipeline string
	rejected event.Needs // what the observer reads of event.Rejected
	waited   event.Needs // and of event.Waited
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	l := r.l
	now := l.clock.Now()
	if l.lim.AllowN(now, 1) { // a token now: no reservation to make or give back
		return r.next.Run(ctx, fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res := l.lim.ReserveN(now, 1) // Burst ≥ 1: always OK
	delay := res.DelayFrom(now)
	if delay > 0 {
		reason := ""
		switch d, ok := ctx.Deadline(); {
		case l.o.Mode == Refuse:
			reason = ReasonNoToken
		case l.o.MaxWait > 0 && delay > l.o.MaxWait:
			reason = ReasonWaitLimit
		case ok && !now.Add(delay).Before(d):
			reason = ReasonDeadline
		}
		if reason != "" {
			res.CancelAt(now)
			return r.refuse(ctx, reason, delay)
		}
		t := l.clock.NewTimer(delay)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			res.CancelAt(l.clock.Now()) // the token goes back to the calls still to come
			return ctx.Err()
		}
		l.waited.Add(1)
		if r.waited != event.NeedsNothing {
			r.obs.Observe(event.Event{Kind: event.Waited, Pipeline: r.pipeline, Stage: Kind, Source: l.name,
				Time: clock.StartStopwatch(l.clock, r.waited).Started(), Delay: delay, Context: ctx})
		}
	}
	return r.next.Run(ctx, fn)
}

// refuse builds the refusal of a call whose token comes in after, and reports
// it.
func (r *runner) refuse(ctx context.Context, reason string, after time.Duration) error {
	r.l.refused.Add(1)
	e := &policy.RejectError{Policy: Kind, Name: r.l.name, Reason: reason, RetryAfter: after, Err: ErrLimited}
	if r.rejected != event.NeedsNothing {
		r.obs.Observe(event.Event{Kind: event.Rejected, Pipeline: r.pipeline, Stage: Kind, Source: r.l.name,
			Time: clock.StartStopwatch(r.l.clock, r.rejected).Started(), Reason: reason, Delay: after, Err: e, Context: ctx})
	}
	return e
}

// ExplainStage implements policy.StageExplainer.
func (l *Limiter) ExplainStage() policy.Stage {
	var mode, refusal string
	switch {
	case l.o.Mode == Refuse:
		mode = "refuses a call that finds no token"
		refusal = fmt.Sprintf("rate limiter %q refuses a call that finds no token (ratelimit.ErrLimited), with a Retry-After when the next one comes", l.name)
	case l.o.MaxWait > 0:
		mode = fmt.Sprintf("a call waits up to %v for its token, never past its deadline", l.o.MaxWait)
		refusal = fmt.Sprintf("rate limiter %q refuses at once a call whose token would come after %v or after its deadline (ratelimit.ErrLimited), with a Retry-After when it would", l.name, l.o.MaxWait)
	default:
		mode = "a call waits for its token, never past its deadline"
		refusal = fmt.Sprintf("rate limiter %q refuses at once a call whose token would come after its deadline (ratelimit.ErrLimited), with a Retry-After when it would", l.name)
	}
	st := policy.Stage{
		Summary: fmt.Sprintf("rate limiter %q: %v a second in bursts of up to %d (calls outside the retry, attempts inside it); %s",
			l.name, l.o.Rate, l.o.Burst, mode),
		Refusal: refusal,
	}
	if l.o.Mode == Wait {
		st.Wait, st.WaitUnbounded = l.o.MaxWait, l.o.MaxWait == 0
	}
	return st
}

// Registry hands out one [Limiter] per name. Pipelines built apart then share a
// bucket by naming it. The zero value is ready to use. It is safe for concurrent
// use.
type Registry struct {
	mu       sync.Mutex // guards limiters
	limiters map[string]*Limiter
}

// Get returns the limiter named o.Name, making it with o the first time. A later
// Get of the same name with other options (Clock aside) is an error. It matches
// ErrInvalidOptions: one bucket cannot have two rates.
func (g *Registry) Get(o Options) (*Limiter, error) {
	name := o.Name
	resolved, err := resolve(name, o)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if l, ok := g.limiters[name]; ok {
		a, b := l.o, resolved
		a.Clock, b.Clock = nil, nil
		if a != b {
			return nil, fmt.Errorf("%w: %s: already made with Rate %v, Burst %d, Mode %v, MaxWait %v; asked for Rate %v, Burst %d, Mode %v, MaxWait %v",
				ErrInvalidOptions, name, a.Rate, a.Burst, a.Mode, a.MaxWait, b.Rate, b.Burst, b.Mode, b.MaxWait)
		}
		return l, nil
	}
	l, err := New(o)
	if err != nil {
		return nil, err
	}
	if g.limiters == nil {
		g.limiters = map[string]*Limiter{}
	}
	g.limiters[name] = l
	return l, nil
}

// Limiters returns the limiters made so far, by name.
func (g *Registry) Limiters() map[string]*Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]*Limiter, len(g.limiters))
	for n, l := range g.limiters {
		out[n] = l
	}
	return out
}
