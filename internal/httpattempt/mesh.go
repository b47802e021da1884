package httpattempt

import (
	"context"
	"sync/atomic"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/clock"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
)

// StageMesh is the Stage of the events a transport reports for a mesh's attempts.
const StageMesh = "mesh"

// Mesh is what a transport (policyhttp's, policygrpc's) knows of the mesh beneath
// it: who owns the retries, and where the mesh's own attempts are counted. A nil
// *Mesh is MeshNone. It is safe for concurrent use.
type Mesh struct {
	owner  callpath.Mesh
	budget policy.RetryBudget // charged for the mesh's retries; nil: none
	lease  policy.RetryLease  // budget, if it prices retries
	obs    event.Observer     // hears the mesh's attempts and retries; nil: none
	clock  clock.Clock

	// spent: the budget refused a retry the mesh made. Calls the mesh owns then tell
	// it not to retry, until the budget allows a retry again.
	spent atomic.Bool
}

// NewMesh returns the Mesh of a transport, nil for MeshNone.
func NewMesh(owner callpath.Mesh, b policy.RetryBudget, o event.Observer, c clock.Clock) *Mesh {
	if owner == callpath.MeshNone {
		return nil
	}
	m := &Mesh{owner: owner, budget: b, obs: o, clock: clock.Or(c)}
	m.lease, _ = b.(policy.RetryLease)
	return m
}

// Call is one call's dealings with the mesh. Its zero value is a call the mesh
// does not own. It is a small value, copied freely: a closure that holds one
// allocates nothing for it.
type Call struct {
	// MeshOwns is set when the mesh owns the call path: the pipeline makes one
	// attempt, and the mesh retries.
	MeshOwns bool
	noRetry  bool // the mesh owns the call, but the budget is spent: it is told not to retry

	// paid is set when the budget was asked for a retry before the call, as the
	// mesh owns it and the budget had refused before. The mesh's first retry uses
	// it, or End gives it back. It is rare: only then is it allocated.
	paid *prepaid
}

// prepaid is a retry taken from the budget before the call.
type prepaid struct {
	taken int64       // what a lease took for it
	used  atomic.Bool // a count or the call's end used it
}

// use reports whether p holds a retry no one used yet, and uses it.
func (p *prepaid) use() bool { return p != nil && !p.used.Swap(true) }

// Begin starts a call under ctx. It returns the context to run the pipeline
// under: marked as owned upstream when the mesh owns the call path, so the
// pipeline's retry makes one attempt. A retry owner already on ctx (further up
// this process, or a caller's) keeps the call path: the mesh does not own it.
//
// While the budget is spent, a call the mesh owns asks it for a retry first. If it
// allows one, the call goes out as usual, and the mesh's first retry is paid.
// Otherwise the mesh is told not to retry. End must be called when the call is over.
func (m *Mesh) Begin(ctx context.Context) (context.Context, Call) {
	if m == nil || m.owner != callpath.MeshEnvoyOwns || callpath.Owned(ctx) {
		return ctx, Call{}
	}
	c := Call{MeshOwns: true}
	if m.spent.Load() && m.budget != nil {
		if taken, ok := m.take(); ok {
			m.spent.Store(false)
			c.paid = &prepaid{taken: taken}
		} else {
			c.noRetry = true
		}
	}
	return callpath.WithUpstreamAttempt(ctx, 1), c
}

// NoRetries reports whether an attempt made under actx tells the mesh not to retry
// (callpath.HeaderEnvoyMaxRetries "0"). It does under a Backstop retry owner, and
// when the mesh owns the call but the budget is spent.
func (m *Mesh) NoRetries(actx context.Context, c Call) bool {
	switch {
	case m == nil:
		return false
	case c.MeshOwns:
		return c.noRetry
	}
	_, owned := callpath.Outgoing(actx)
	return owned
}

// Count counts the attempts the mesh made for one attempt of the call: attempts is
// the response's x-envoy-attempt-count, final the outcome of the last, as the
// transport classified it. Each retry the mesh made is charged to the budget as the
// pipeline's retry charges its own: a failure (OnFailure), then a withdrawal (or a
// lease's Take and End). It is reported to the observer: an event.AttemptEnd
// failed with callpath.ErrMeshRetried and an event.RetryScheduled of reason
// callpath.ReasonMesh, both of Stage [StageMesh]. A retry the budget refused has
// been made all the same: calls the mesh owns then tell it not to retry, until the
// budget allows a retry again.
func (m *Mesh) Count(actx context.Context, c Call, pipeline string, attempts int, final error) {
	if m == nil || attempts < 2 {
		return
	}
	for n := 2; n <= attempts; n++ {
		if m.budget != nil {
			m.budget.OnFailure() // attempt n−1 failed, as the mesh retried it (gRFC A6 counts each)
			ok := true
			switch {
			case c.paid.use():
				if m.lease != nil {
					m.lease.End(c.paid.taken, n == attempts && final == nil)
				}
			case m.lease != nil:
				var taken int64
				if taken, ok = m.lease.Take(callpath.ReasonMesh); ok {
					m.lease.End(taken, n == attempts && final == nil) // the retry is over
				}
			default:
				ok = m.budget.Withdraw()
			}
			if !ok {
				m.spent.Store(true)
			}
		}
		if m.obs != nil {
			now := m.clock.Now()
			m.obs.Observe(event.Event{Kind: event.AttemptEnd, Pipeline: pipeline, Stage: StageMesh, Time: now,
				Attempt: n - 1, Err: callpath.ErrMeshRetried, Context: actx})
			m.obs.Observe(event.Event{Kind: event.RetryScheduled, Pipeline: pipeline, Stage: StageMesh, Time: now,
				Attempt: n, Reason: callpath.ReasonMesh, Err: callpath.ErrMeshRetried, Context: actx})
		}
	}
}

// End ends the call. A retry paid before the call that the mesh did not make is
// given back to a lease as a retry that failed. Other budgets keep it: they have no
// way to give a withdrawal back.
func (m *Mesh) End(c Call) {
	if m != nil && c.paid.use() && m.lease != nil {
		m.lease.End(c.paid.taken, false)
	}
}

// Spent reports whether the budget refused the last retry the mesh made (and has
// not allowed one since): calls the mesh owns tell it not to retry.
func (m *Mesh) Spent() bool { return m != nil && m.spent.Load() }

// take asks the budget for one retry.
func (m *Mesh) take() (int64, bool) {
	if m.lease != nil {
		return m.lease.Take(callpath.ReasonMesh)
	}
	return 0, m.budget.Withdraw()
}

// MeshAttempts reads a response's x-envoy-attempt-count with callpath.ParseAttempt:
// the attempts an Envoy router made, or false if it says nothing valid.
func MeshAttempts(v string) (int, bool) {
	if v == "" {
		return 0, false
	}
	return callpath.ParseAttempt("", v, "")
}
