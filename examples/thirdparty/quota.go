package thirdparty

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// Kind is the quota's Placement.Kind.
const Kind = "call_quota"

// Quota lets a fixed number of calls through, then rejects every call. It stands
// outside the retry, so a call's retries spend one unit, and once per pipeline.
type Quota struct {
	name string
	left atomic.Int64
}

// NewQuota returns a quota of n calls.
func NewQuota(name string, n int64) *Quota {
	q := &Quota{name: name}
	q.left.Store(n)
	return q
}

// Placement: outside the retry, once per pipeline.
func (q *Quota) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Retry: policy.OutsideRetry, Once: true, Prompt: true}
}

// Name returns the quota's name.
func (q *Quota) Name() string { return q.name }

// Gauges publishes the calls left.
func (q *Quota) Gauges() []policy.Gauge {
	return []policy.Gauge{{Name: "quota_left", Help: "Calls a quota still lets through.",
		Value: func() float64 { return float64(q.left.Load()) }}}
}

// Bind returns the Runner that spends one unit a call.
func (q *Quota) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return policy.RunnerFunc(func(ctx context.Context, fn policy.Func) error {
		if q.left.Add(-1) >= 0 {
			return next.Run(ctx, fn)
		}
		q.left.Add(1)
		err := &policy.RejectError{Policy: Kind, Name: q.name, Reason: "spent", RetryAfter: time.Minute}
		if event.NeedsOf(env.Observer, event.Rejected) != event.NeedsNothing {
			env.Observer.Observe(event.Event{Kind: event.Rejected, Pipeline: env.Pipeline, Stage: Kind,
				Source: q.name, Reason: err.Reason, Delay: err.RetryAfter, Err: err, Context: ctx})
		}
		return err
	})
}

var _ policy.Publisher = (*Quota)(nil)
