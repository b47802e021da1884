package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/jitter"

	"github.com/backstop-go/backstop/internal/check"
	"github.com/backstop-go/backstop/internal/window"
	"github.com/backstop-go/backstop/policy"
)

// Defaults for zero Options fields.
const (
	// DefaultK is the ratio of requests to accepts above which requests are
	// refused: the SRE book's 2.
	DefaultK = 2.0
	// DefaultWindow is how far back requests and accepts count: the book's two
	// minutes.
	DefaultWindow = 2 * time.Minute
)

var (
	// ErrThrottled is matched by every refusal of a throttle. A refusal is a
	// *policy.RejectError, so it matches policy.ErrRejected too.
	ErrThrottled = errors.New("throttle: refused locally")
	// ErrInvalidOptions is matched by New's errors for bad options.
	ErrInvalidOptions = errors.New("throttle: invalid options")
)

// Options configure a [Throttle]. The zero value is the SRE book's: K = 2 over
// the last two minutes.
type Options struct {
	// Name names the throttle in events, metrics and errors. Required.
	Name string
	// K is how many requests per accepted request the client may send before it
	// starts refusing, ≥ 1. 0 means DefaultK (2). Lower refuses sooner.
	K float64
	// Window is how far back requests and accepts count. 0 means DefaultWindow
	// (2 min). It is kept in 10 buckets, so requests age out in steps of Window/10.
	Window time.Duration
	// Accepted says whether the backend accepted a request that ended with err.
	// Nil means it did, unless err says it refused the work. It did so if err
	// matches policy.ErrRejected: a 429 or 503 with Retry-After through policyhttp,
	// RESOURCE_EXHAUSTED through policygrpc, a shedder's refusal. It did so too if
	// err matches context.DeadlineExceeded: it did not answer in time. Errors of
	// the caller's own (context.Canceled) count neither way.
	Accepted func(err error) bool
	// Clock reads the time; nil means clock.System().
	Clock clock.Clock
	// Rand draws the refusals; nil means jitter.System().
	Rand jitter.Rand
}

// Throttle is client-side adaptive throttling, a stage of kind [Kind]. It is safe
// for concurrent use: one mutex, no allocation per call. Share one among the
// pipelines that call one backend. Build it with [New].
type Throttle struct {
	name     string
	k        float64
	window   time.Duration
	accepted func(error) bool
	clock    clock.Clock
	rand     jitter.Rand
	refusal  *policy.RejectError // shared by every refusal: refusing allocates nothing
	refused  atomic.Uint64

	mu  sync.Mutex  // guards win
	win window.Pair // requests, accepts
}

// New returns a throttle named o.Name; the name labels its refusals and events. Or
// it returns an error matching ErrInvalidOptions naming the bad field.
func New(o Options) (*Throttle, error) {
	name := o.Name
	bad := check.Invalid[*Throttle](fmt.Errorf("%w: %s", ErrInvalidOptions, name))
	switch {
	case name == "":
		return bad("name is empty; want the backend's name")
	case o.K == 0:
		o.K = DefaultK
	case !(o.K >= 1) || math.IsInf(o.K, 0):
		return bad("K is %v; want a finite number ≥ 1, or 0 for the default %v", o.K, DefaultK)
	}
	switch {
	case o.Window == 0:
		o.Window = DefaultWindow
	case o.Window < window.Buckets:
		return bad("Window is %v; want ≥ 10ns (ten buckets), or 0 for the default %v", o.Window, DefaultWindow)
	}
	if o.Accepted == nil {
		o.Accepted = DefaultAccepted
	}
	clock := clock.Or(o.Clock)
	return &Throttle{name: name, k: o.K, window: o.Window, accepted: o.Accepted, clock: clock,
		rand: jitter.Or(o.Rand), refusal: newRefusal(name), win: window.New(clock.Now(), o.Window)}, nil
}

// DefaultAccepted is Options.Accepted's default. A request was accepted unless its
// error matches policy.ErrRejected or context.DeadlineExceeded.
func DefaultAccepted(err error) bool {
	return err == nil || !(errors.Is(err, policy.ErrRejected) || errors.Is(err, context.DeadlineExceeded))
}

// Name returns the throttle's name.
func (t *Throttle) Name() string { return t.name }

// Placement: a throttle is placed like a breaker.
func (t *Throttle) Placement() policy.Placement { return policy.Placement{Kind: Kind, Prompt: true} }

// Bind returns the Runner that throttles each call (or attempt, inside a retry).
func (t *Throttle) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return &runner{t: t, next: next}
}

type runner struct {
	t    *Throttle
	next policy.Runner
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	t := r.t
	now := t.clock.Now()
	t.mu.Lock()
	requests, accepts := t.win.Sums(now)
	p := t.probability(requests, accepts)
	refuse := p > 0 && t.rand.Float64() < p
	if refuse {
		t.win.Add(now, 1, 0) // a refused request still counts as a request
	}
	t.mu.Unlock()
	if refuse {
		t.refused.Add(1)
		return t.refusal
	}
	err := r.next.Run(ctx, fn)
	if err != nil && errors.Is(err, context.Canceled) {
		return err // the caller's own: says nothing of the backend
	}
	var accept int64
	if t.accepted(err) {
		accept = 1
	}
	now = t.clock.Now()
	t.mu.Lock()
	t.win.Add(now, 1, accept)
	t.mu.Unlock()
	return err
}

// Probability returns the chance that a request is refused now.
func (t *Throttle) Probability() float64 {
	now := t.clock.Now()
	t.mu.Lock()
	requests, accepts := t.win.Sums(now)
	t.mu.Unlock()
	return t.probability(requests, accepts)
}

// probability is the SRE book's max(0, (requests − K·accepts) / (requests + 1)).
func (t *Throttle) probability(requests, accepts int64) float64 {
	return max(0, (float64(requests)-t.k*float64(accepts))/float64(requests+1))
}

// Counts returns the requests and accepts of the window ending now.
func (t *Throttle) Counts() (requests, accepts int64) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.win.Sums(now)
}

// Refused returns how many requests the throttle has refused so far.
func (t *Throttle) Refused() uint64 { return t.refused.Load() }

// ExplainStage implements policy.StageExplainer.
func (t *Throttle) ExplainStage() policy.Stage {
	return policy.Stage{
		Summary: fmt.Sprintf("adaptive throttle %q: refuses locally with probability (requests − %v × accepts) ÷ (requests + 1) over the last %v",
			t.name, t.k, t.window),
		Refusal: fmt.Sprintf("throttle %q refuses locally, more often the more its backend refuses (throttle.ErrThrottled)", t.name),
	}
}

// newRefusal returns the error of every request the throttle named name refuses.
// Its RetryAfter is 0. The share refused falls as the backend accepts again, at no
// time the throttle could name.
func newRefusal(name string) *policy.RejectError {
	return &policy.RejectError{Policy: Kind, Name: name, Reason: "throttled", Err: ErrThrottled}
}
