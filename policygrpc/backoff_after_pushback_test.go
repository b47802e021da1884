package policygrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

// TestUnary_BackoffRestartsAfterPushback: after a retry made on a server's pushback,
// the next backoff starts again from initialBackoff (gRFC A6).
func TestUnary_BackoffRestartsAfterPushback(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	s := serve(t, &server{answer: func(ctx context.Context, n int) error {
		if n == 2 {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, "50"))
		}
		if n < 4 {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}})
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 5, Base: 100 * time.Millisecond, Cap: time.Second,
		Strategy: retry.GRPC{Multiplier: 2}, Clock: clock, Rand: policytest.NewRand(0.5)}))))
	c := dial(t, s.addr, policygrpc.DialOptions(p, policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}, clock.Waits(),
		"backoff 100ms, the pushback's 50ms exactly, then initialBackoff again")
}
