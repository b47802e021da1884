package budget

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/backstop-go/backstop/internal/window"
)

// Defaults for zero RatioOptions fields.
const (
	DefaultRatio        = 0.1
	DefaultMinPerSecond = 10
	DefaultWindow       = 10 * time.Second
)

// RatioOptions configure a [Ratio]. The zero value is valid: retries may be 10 %
// of the calls of the last 10 s, plus 10 per second.
type RatioOptions struct {
	// Name names the budget. Package fleet keys its shared state by it. It is
	// optional for a budget of one process.
	Name string
	// Ratio is the share of recent calls that may be retried, in (0, 1]. 0 means
	// DefaultRatio (0.1). Finagle's default is 0.2, Envoy's budget_percent 20 %.
	Ratio float64
	// MinPerSecond is a floor of retries per second over the window. With it, a
	// quiet service can still retry. 0 means DefaultMinPerSecond (10). Negative
	// means no floor.
	MinPerSecond float64
	// Window is how far back calls and retries count; 0 means DefaultWindow (10 s).
	// It is kept in 10 buckets, so calls age out in steps of Window/10.
	Window time.Duration
	// Clock reads the time; nil means clock.System().
	Clock clock.Clock
}

// Ratio is a retry budget in the manner of Finagle's RetryBudget. Over the last
// Window, retries may be at most Ratio × the calls, plus MinPerSecond × Window.
// Calls here are first attempts. Every call deposits, and every retry
// withdraws. A retry that would exceed the budget is refused. Unlike
// [TokenBucket], a Ratio is indifferent to successes and failures. It caps retry
// load at a fixed share of traffic.
//
// A Ratio is safe for concurrent use: one mutex, no allocation per call. It is
// meant to be shared by the pipelines that call one dependency. Build it with
// [NewRatio].
type Ratio struct {
	stage
	counts
	clock  clock.Clock
	ratio  float64
	floor  float64 // MinPerSecond × Window seconds
	window time.Duration

	mu  sync.Mutex  // guards win
	win window.Pair // calls, retries
}

// NewRatio returns a Ratio budget with o's zero fields set to their defaults.
func NewRatio(o RatioOptions) (*Ratio, error) {
	switch {
	case o.Ratio == 0:
		o.Ratio = DefaultRatio
	case !(o.Ratio > 0 && o.Ratio <= 1):
		return nil, fmt.Errorf("%w: Ratio is %v; want a number in (0, 1]", ErrInvalidOptions, o.Ratio)
	}
	switch {
	case o.MinPerSecond == 0:
		o.MinPerSecond = DefaultMinPerSecond
	case o.MinPerSecond < 0:
		o.MinPerSecond = 0
	case math.IsNaN(o.MinPerSecond) || math.IsInf(o.MinPerSecond, 0):
		return nil, fmt.Errorf("%w: MinPerSecond is %v; want a finite number", ErrInvalidOptions, o.MinPerSecond)
	}
	switch {
	case o.Window == 0:
		o.Window = DefaultWindow
	case o.Window < window.Buckets:
		return nil, fmt.Errorf("%w: Window is %v; want ≥ 10ns (ten buckets)", ErrInvalidOptions, o.Window)
	}
	clock := clock.Or(o.Clock)
	return &Ratio{
		clock:  clock,
		win:    window.New(clock.Now(), o.Window),
		ratio:  o.Ratio,
		floor:  o.MinPerSecond * o.Window.Seconds(),
		window: o.Window,
	}, nil
}

// Deposit counts a call.
func (r *Ratio) Deposit() {
	now := r.clock.Now()
	r.mu.Lock()
	r.win.Add(now, 1, 0)
	r.mu.Unlock()
}

// Withdraw allows a retry if the window's retries stay within Ratio × calls + floor.
func (r *Ratio) Withdraw() bool {
	now := r.clock.Now()
	r.mu.Lock()
	calls, retries := r.win.Sums(now)
	ok := float64(retries+1) <= r.ratio*float64(calls)+r.floor
	if ok {
		r.win.Add(now, 0, 1)
	}
	r.mu.Unlock()
	return r.count(ok)
}

// Level returns how many retries may start now.
func (r *Ratio) Level() float64 {
	now := r.clock.Now()
	r.mu.Lock()
	calls, retries := r.win.Sums(now)
	r.mu.Unlock()
	return max(0, math.Floor(r.ratio*float64(calls)+r.floor)-float64(retries))
}

// OnSuccess does nothing: a Ratio counts traffic, not outcomes.
func (r *Ratio) OnSuccess() {}

// OnFailure does nothing: a Ratio counts traffic, not outcomes.
func (r *Ratio) OnFailure() {}
