package policygrpc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policygrpc"
)

// replicas answers the n-th UnaryCall by answer(ctx, n), naming the replica in the
// response and in a header.
type replicas struct {
	testgrpc.UnimplementedTestServiceServer
	mu     sync.Mutex
	n      int
	answer func(ctx context.Context, n int) error
}

func (s *replicas) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if err := s.answer(ctx, n); err != nil {
		return nil, err
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("replica", fmt.Sprint(n)))
	return &testgrpc.SimpleResponse{Username: fmt.Sprint("replica ", n)}, nil
}

func serveReplicas(t *testing.T, s *replicas) string { return listen(t, s) }

func TestServiceConfig_HedgingPolicyOverARealChannel(t *testing.T) {
	// The first call hangs, as a slow replica does; the hedge answers.
	s := &replicas{answer: func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		return nil
	}}
	addr := serveReplicas(t, s)
	cfg, err := policygrpc.ParseServiceConfig([]byte(`{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.01s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`))
	require.NoError(t, err)
	e := cfg.Entries()[0]
	require.True(t, e.Hedging)
	require.Equal(t, 3, e.MaxAttempts)
	require.Equal(t, []codes.Code{codes.Unavailable}, e.RetryableCodes)

	client := dial(t, addr, cfg.DialOptions()...)
	var header metadata.MD
	res, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	require.Equal(t, "replica 2", res.GetUsername(), "the winner's reply, decoded into the caller's message")
	require.Equal(t, []string{"2"}, header.Get("replica"), "and the winner's header")
}

func TestServiceConfig_HedgingNonFatalCodeStartsTheNextAttemptAtOnce(t *testing.T) {
	s := &replicas{answer: func(_ context.Context, n int) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "draining")
		}
		return nil
	}}
	addr := serveReplicas(t, s)
	// An hour's delay: only the non-fatal UNAVAILABLE can start the second attempt.
	cfg, err := policygrpc.ParseServiceConfig([]byte(`{"methodConfig": [{"name": [{}],
		"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "3600s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`))
	require.NoError(t, err)
	client := dial(t, addr, cfg.DialOptions()...)
	res, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.NoError(t, err)
	require.Equal(t, "replica 2", res.GetUsername())

	// A fatal code ends the call.
	fatal := &replicas{answer: func(context.Context, int) error { return status.Error(codes.InvalidArgument, "bad") }}
	client = dial(t, serveReplicas(t, fatal), cfg.DialOptions()...)
	_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, 1, fatal.n)
}
