package policygrpc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
)

// channelBudget is a service config's retryThrottling bucket as its pipelines hold
// it: the retries ask it whether they may start, and the interceptors, not the
// retries, count every RPC of the channel into it (gRFC A6: "every outgoing RPC,
// regardless of service or method"), so that methods without a retryPolicy and calls
// whose retries another process owns are counted too, each once.
type channelBudget struct{ b *budget.TokenBucket }

// Placement is a budget's.
func (channelBudget) Placement() policy.Placement { return budget.Place }

// Bind returns next: the retry inside talks to the budget through policy.Env.Budget.
func (channelBudget) Bind(next policy.Runner, _ policy.Env) policy.Runner { return next }

// Withdraw reports whether the bucket allows a retry.
func (c channelBudget) Withdraw() bool { return c.b.Withdraw() }

// Deposit, OnSuccess and OnFailure do nothing: the interceptors count each RPC.
func (channelBudget) Deposit()   {}
func (channelBudget) OnSuccess() {}
func (channelBudget) OnFailure() {}

// ExplainStage implements policy.StageExplainer.
func (c channelBudget) ExplainStage() policy.Stage { return c.b.ExplainStage() }

// counts reports whether the RPCs of a call made under ctx are counted into c's
// channel bucket: there is one, and no pipeline of this process owns the call path
// above (that owner counts its call with its own budget; give it the channel's bucket
// to have it counted there, once per failed attempt). Under an owner in another
// process the RPCs are counted here: they are this channel's evidence of the backend.
func (c *classifier) counts(ctx context.Context) bool {
	if c.bucket == nil {
		return false
	}
	_, upstream, owned := callpath.Attempt(ctx)
	return !owned || upstream
}

// record counts one RPC's outcome into the channel bucket as gRFC A6 says: a success
// refills it by tokenRatio; a failure costs a token if its code is one the method
// retries (or, for hedging, a non-fatal one), or if the server's pushback said not to
// retry, whatever the code. Other failures, and the end of our own context, say
// nothing about the backend and cost nothing.
func (c *classifier) record(ctx context.Context, err error, trailer metadata.MD) {
	switch {
	case err == nil:
		c.bucket.OnSuccess()
	case c.throttlingFailure(ctx, err, trailer):
		c.bucket.OnFailure()
	}
}

func (c *classifier) throttlingFailure(ctx context.Context, err error, trailer metadata.MD) bool {
	if d, ok := pushbackOf(trailer); ok && d < 0 {
		return true
	}
	code := status.Code(err)
	if (code == codes.Canceled || code == codes.DeadlineExceeded) && past(ctx) {
		return false
	}
	return int(code) < len(c.retryable) && c.retryable[code]
}
