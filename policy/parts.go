package policy

import "github.com/backstop-go/backstop/event"

// Budget returns the pipeline's retry budget, the stage its retry asks before each
// retry; nil if it has none. A transport charges to it the retries made beneath the
// pipeline, where it cannot see them (a service mesh's), so that one budget bounds
// every retry on the call path.
func (p *Pipeline) Budget() RetryBudget {
	if p == nil || p.budget < 0 {
		return nil
	}
	return p.policies[p.budget].(RetryBudget) // checked by checkOrder
}

// Observer returns the observer the pipeline reports to, prepared for it (see
// [event.ForPipeline]); nil if it is unobserved. A transport reports to it what
// happens beneath the pipeline, such as a mesh's attempts, as the pipeline's own.
func (p *Pipeline) Observer() event.Observer {
	if p == nil {
		return nil
	}
	return p.bound
}
