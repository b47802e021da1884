package policygrpc_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

// throttled is a service config whose EmptyCall retries UNAVAILABLE (4 attempts),
// whose UnaryCall has a timeout and no retryPolicy, and whose channel throttles
// retries with a 10-token bucket refilled by 0.1 per success.
const throttled = `{
  "methodConfig": [{
    "name": [{"service": "grpc.testing.TestService", "method": "EmptyCall"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1,
      "retryableStatusCodes": ["UNAVAILABLE"]}
  }, {
    "name": [{"service": "grpc.testing.TestService", "method": "UnaryCall"}],
    "timeout": "30s"
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

func throttledConfig(t *testing.T) *policygrpc.ServiceConfig {
	t.Helper()
	c, err := policygrpc.ParseServiceConfig([]byte(throttled))
	require.NoError(t, err)
	return c
}

// pushingBack answers every call with err and the pushback trailer value given.
func pushingBack(err error, value string) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, value))
		return err
	}
}

// TestThrottling_PushbackStopCostsATokenWhateverTheCode: a pushback that says not to
// retry is a throttling failure even on a code that is not retried (gRFC A6), for a
// pipeline's own bucket and for a service config's channel bucket alike.
func TestThrottling_PushbackStopCostsATokenWhateverTheCode(t *testing.T) {
	for _, value := range []string{"-1", "soon"} {
		invalid := status.Error(codes.InvalidArgument, "no")

		s := serve(t, &server{answer: pushingBack(invalid, value)})
		bucket := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
		c := dial(t, s.addr, policygrpc.DialOptions(retrying(3, policytest.NewClock(t0).AutoAdvance(true), bucket), policygrpc.Options{})...)
		_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.ErrorIs(t, err, retry.ErrNotRetryable)
		require.Equal(t, 1, s.calls())
		require.InDelta(t, 9.0, bucket.Tokens(), 1e-9, "pushback %q: tokens 9 = 10 − 1 refusal", value)

		sc := throttledConfig(t)
		s = serve(t, &server{answer: pushingBack(invalid, value)})
		c = dial(t, s.addr, sc.DialOptions()...)
		_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.Equal(t, 1, s.calls())
		require.InDelta(t, 9.0, sc.Budget().Tokens(), 1e-9, "pushback %q on the channel: tokens 9 = 10 − 1 refusal", value)

		// The same on a method with no retryPolicy: every RPC of the channel counts.
		_, err = c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		require.InDelta(t, 8.0, sc.Budget().Tokens(), 1e-9, "pushback %q on UnaryCall: tokens 8 = 9 − 1 refusal", value)
	}

	// A code that is not retried, without a pushback, costs nothing (A6: it says
	// nothing about the server's health).
	sc := throttledConfig(t)
	s := serve(t, &server{answer: always(status.Error(codes.InvalidArgument, "no"))})
	c := dial(t, s.addr, sc.DialOptions()...)
	_, _ = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	_, _ = c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.InDelta(t, 10.0, sc.Budget().Tokens(), 1e-9)
}

// TestThrottling_EveryRPCOfTheChannelRefills: successes of a method without a
// retryPolicy, and of a method no entry names, refill the channel's bucket.
func TestThrottling_EveryRPCOfTheChannelRefills(t *testing.T) {
	sc := throttledConfig(t)
	for range 5 {
		sc.Budget().OnFailure()
	}
	s := serve(t, &server{answer: always(nil)})
	c := dial(t, s.addr, sc.DialOptions()...)
	for range 11 {
		_, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		require.NoError(t, err)
	}
	require.InDelta(t, 6.1, sc.Budget().Tokens(), 1e-9, "tokens 6.1 = 5 + 11 successes × 0.1")

	// A method no entry names is an RPC of the channel too: a stream this time.
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, err = stream.CloseAndRecv()
	require.Equal(t, codes.Unimplemented, status.Code(err), "the test server has no StreamingInputCall")
	require.InDelta(t, 6.1, sc.Budget().Tokens(), 1e-9, "UNIMPLEMENTED is no throttling failure")

	ss := &streams{}
	c = dial(t, serveStreams(t, ss), sc.DialOptions()...)
	out, err := c.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}})
	require.NoError(t, err)
	_, err = out.Recv()
	require.NoError(t, err)
	_, err = out.Recv()
	require.ErrorIs(t, err, io.EOF)
	in, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, err = in.CloseAndRecv()
	require.NoError(t, err)
	require.InDelta(t, 6.3, sc.Budget().Tokens(), 1e-9, "tokens 6.3 = 6.1 + 2 streams that ended with OK")
}

// TestThrottling_UpstreamOwnerStillCounts: under a retry owner in another process the
// call makes one attempt, and its failure still costs this process's bucket a token;
// under an owner in this process, the owner's pipeline counts each failed attempt
// once, in the bucket it holds.
func TestThrottling_UpstreamOwnerStillCounts(t *testing.T) {
	down := status.Error(codes.Unavailable, "down")

	sc := throttledConfig(t)
	s := serve(t, &server{answer: always(down)})
	c := dial(t, s.addr, sc.DialOptions()...)
	_, err := c.EmptyCall(callpath.WithUpstreamAttempt(context.Background(), 2), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 1, s.calls(), "the caller upstream owns the retries")
	require.InDelta(t, 9.0, sc.Budget().Tokens(), 1e-9, "tokens 9 = 10 − 1 failed attempt, seen here")

	// In this process: an outer pipeline holding the channel's bucket owns the call
	// path; the bucket is charged once per failed attempt, not twice.
	sc = throttledConfig(t)
	s = serve(t, &server{answer: always(down)})
	c = dial(t, s.addr, sc.DialOptions()...)
	outer := policy.Must(policy.Wrap(sc.Budget(), policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: policytest.NewClock(t0).AutoAdvance(true)}))))
	err = outer.Do(context.Background(), func(ctx context.Context) error {
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		return err
	})
	require.Error(t, err)
	require.Equal(t, 3, s.calls(), "the outer retry's 3 attempts, one RPC each")
	require.InDelta(t, 7.0, sc.Budget().Tokens(), 1e-9, "tokens 7 = 10 − 3 failed attempts, each charged once")
}
