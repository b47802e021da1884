package policygrpc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/internal/race"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

// TestUnary_AttemptMetadataUnderEveryKindOfContext: the attempt metadata reach the
// server on every attempt whether the caller's context is context.Background() (whose
// attempts' contexts are made once and shared), one of its own, or one that carries
// outgoing metadata already; and what one call sends does not leak into the next.
func TestUnary_AttemptMetadataUnderEveryKindOfContext(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	flaky := serve(t, &server{answer: func(_ context.Context, n int) error {
		if n%2 == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}})
	c := dial(t, flaky.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)
	own, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ctx := range []context.Context{
		context.Background(),
		own,
		metadata.AppendToOutgoingContext(own, "tenant", "a"),
		context.Background(),
	} {
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"1", "2", "1", "2", "1", "2", "1", "2"}, flaky.values(policygrpc.MetadataAttempt))
	require.Equal(t, []string{"", "1", "", "1", "", "1", "", "1"}, flaky.values(policygrpc.MetadataPreviousAttempts))
	require.Equal(t, []string{"", "", "", "", "a", "a", "", ""}, flaky.values("tenant"), "the caller's own metadata, on its calls only")
}

// TestUnaryClientInterceptor_Allocations counts what the interceptor allocates around
// an invoker that succeeds at once: under context.Background(), the call's closure and
// the attempt's call options; under a context of the caller's own, also the retry's
// attempt mark and the outgoing metadata's context.
func TestUnaryClientInterceptor_Allocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	ic := policygrpc.UnaryClientInterceptor(policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4})))), policygrpc.Options{})
	var sent metadata.MD
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		sent, _ = metadata.FromOutgoingContext(ctx)
		return nil
	}
	own, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		max  float64
	}{
		{"context.Background()", context.Background(), 2}, // closure, options
		{"a cancellable context", own, 5},                 // + attempt mark, metadata, its context
	} {
		n := testing.AllocsPerRun(100, func() {
			if err := ic(tt.ctx, "/s/m", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
		require.LessOrEqual(t, n, tt.max, "allocations of a unary call under %s", tt.name)
		require.NoError(t, ic(tt.ctx, "/s/m", nil, nil, nil, invoker))
		require.Equal(t, []string{"1"}, sent.Get(policygrpc.MetadataAttempt), "the attempt metadata under %s", tt.name)
	}
}
