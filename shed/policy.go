package shed

import (
	"context"
	"fmt"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
)

// Placement: a shedder is outermost, once, in a pipeline with no retry.
func (s *Shedder) Placement() policy.Placement {
	return policy.Placement{Kind: Kind, Outermost: true, Once: true}
}

// Bind returns the Runner that admits each call and refuses the rest with a
// *policy.RejectError. A call's priority is the one set by WithPriority, lowered for an
// upstream retry. Refusals go to the shedder's subscribers, not to env.Observer:
// policy.Wrap subscribes that one ([Shedder.Subscribe]).
func (s *Shedder) Bind(next policy.Runner, env policy.Env) policy.Runner {
	return &runner{s: s, next: next, pipeline: env.Pipeline}
}

type runner struct {
	s        *Shedder
	next     policy.Runner
	pipeline string
}

func (r *runner) Run(ctx context.Context, fn policy.Func) error {
	p := priorityOf(ctx)
	permit, why, ra := r.s.tryAdmit(ctx, p)
	if why != ReasonNone {
		r.s.report(ctx, r.pipeline, why, p, ra.secs)
		if why == ReasonCanceled {
			return fmt.Errorf("shed: %w", ctx.Err())
		}
		return r.s.refusal(why, ra.secs)
	}
	if 2*permit.inflight >= r.s.limit.Load() {
		// Half the limit in use: a retry's backoff in fn gives the slot back. Only then
		// is a new context made per call, so a server with room pays nothing for it.
		ctx = callpath.WithPauser(ctx, permit.Pauser())
	}
	err := r.next.Run(ctx, fn)
	permit.release(err == nil)
	return err
}

// ExplainStage implements policy.StageExplainer.
func (s *Shedder) ExplainStage() policy.Stage {
	limit := fmt.Sprintf("a fixed limit of %d in flight", s.Limit())
	if g := s.adaptive; g != nil {
		limit = fmt.Sprintf("an adaptive limit (now %d, within %v–%v) that follows latency", s.Limit(), g.min, g.max)
		if g.cpu != nil {
			limit += fmt.Sprintf(", and, while this process's own work queues for its CPUs (over %d goroutines a CPU waiting, %v each), refuses what the CPUs cannot serve", cpuRunnable, g.cpu.target)
		}
	}
	queue := "no queue"
	if s.opts.Queue.Max > 0 {
		queue = fmt.Sprintf("a queue of %d (%v, or %v under a standing queue)", s.opts.Queue.Max, s.queueInterval(), s.opts.Queue.Target)
	}
	return policy.Stage{
		Summary: fmt.Sprintf("shedder %q admits work up to %s, with %s; retries may fill %v%% of the limit", s.name, limit, queue, s.sheddable*100),
		Refusal: fmt.Sprintf("shedder %q refuses work beyond its limit at once (shed.ErrShed; %d with Retry-After as middleware)", s.name, s.status),
	}
}
