package policygrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
)

// panicking is a policy whose runner panics: user code on the goroutine the stream
// interceptor starts for the pipeline.
type panicking struct{}

func (panicking) Placement() policy.Placement { return policy.Placement{Kind: "panicking", Free: true} }
func (panicking) Bind(policy.Runner, policy.Env) policy.Runner {
	return policy.RunnerFunc(func(context.Context, policy.Func) error { panic("policy bug") })
}

// TestStream_APanicInThePipelineIsTheStreamsError: a panic in a stream's pipeline,
// which runs on a goroutine the interceptor started, does not kill the process: the
// stream fails with it, a *policy.PanicError carrying the value and stack.
func TestStream_APanicInThePipelineIsTheStreamsError(t *testing.T) {
	addr := serveStreams(t, &streams{})
	c := dial(t, addr, grpc.WithChainStreamInterceptor(policygrpc.RetryStreamClientInterceptor(policy.Must(policy.Wrap(panicking{})), policygrpc.StreamOptions{})))
	stream, err := c.StreamingInputCall(context.Background())
	if err == nil {
		_, err = stream.CloseAndRecv()
	}
	require.Error(t, err)
	var pe *policy.PanicError
	require.True(t, errors.As(err, &pe), "the stream's error %v carries the panic", err)
	require.Equal(t, "policy bug", pe.Value)
	require.NotEmpty(t, pe.Stack)
	require.Equal(t, codes.Unknown, status.Code(err))
}
