package policygrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
)

// TestRoutes_MatchAsServiceConfigNames: a method's route wins over its service's,
// which wins over the default.
func TestRoutes_MatchAsServiceConfigNames(t *testing.T) {
	rt := policy.Must(policygrpc.NewRoutes(
		policygrpc.Route{Name: "pkg.Svc", Stack: "service"},
		policygrpc.Route{Name: "/pkg.Svc/Special", Stack: "method"},
		policygrpc.Route{Stack: "default"},
	))
	for method, want := range map[string]string{
		"/pkg.Svc/Special": "method",
		"/pkg.Svc/Other":   "service",
		"/other.Svc/Get":   "default",
	} {
		if got := rt.Match(method); got == nil || got.Stack != want {
			t.Errorf("Match(%q) = %v, want the route of %s", method, got, want)
		}
	}
	require.Nil(t, policy.Must(policygrpc.NewRoutes(policygrpc.Route{Name: "a.B"})).Match("/c.D/E"), "no default: nil")
}

func TestNewRoutes_RefusesBadNames(t *testing.T) {
	for _, c := range []struct {
		routes []policygrpc.Route
		want   string
	}{
		{[]policygrpc.Route{{Name: "/M"}, {Name: "a/b/c"}}, `route 2: name "a/b/c"`},
		{[]policygrpc.Route{{Name: "pkg.S/"}}, `route 1: name "pkg.S/"`},
		{[]policygrpc.Route{{Name: "pkg.S/M"}, {Name: "/pkg.S/M"}}, `routes 1 and 2 both name "pkg.S/M"`},
		{[]policygrpc.Route{{}, {}}, "routes 1 and 2 are both the default"},
	} {
		_, err := policygrpc.NewRoutes(c.routes...)
		if !errors.Is(err, policygrpc.ErrInvalidRoute) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRoutes(%v) = %v, want ErrInvalidRoute containing %q", c.routes, err, c.want)
		}
	}
}

// TestRouterInterceptors_PipelinePerMethod: on a real server on 127.0.0.1, the method
// with a retrying route makes 3 attempts, the others as their routes say.
func TestRouterInterceptors_PipelinePerMethod(t *testing.T) {
	s := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	clock := policytest.NewClock(t0).AutoAdvance(true)
	rt := policy.Must(policygrpc.NewRoutes(
		policygrpc.Route{Name: "grpc.testing.TestService/EmptyCall", Pipeline: retrying(3, clock)},
		policygrpc.Route{Name: "grpc.testing.TestService", Pipeline: retrying(2, clock), RetryableCodes: []codes.Code{codes.Aborted}},
	))
	c := dial(t, s.addr, policygrpc.RouterDialOptions(rt)...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 3, s.calls(), "EmptyCall: its own route retries UNAVAILABLE 3 times")
	_, err = c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 4, s.calls(), "UnaryCall: the service's route retries only ABORTED: 1 attempt")
}

// flakyStreams fails the first n streams with UNAVAILABLE before any message.
type flakyStreams struct {
	testgrpc.UnimplementedTestServiceServer
	n, calls atomic.Int64
}

func (s *flakyStreams) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	if s.calls.Add(1) <= s.n.Load() {
		return status.Error(codes.Unavailable, "down")
	}
	return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
}

// TestRouterInterceptors_StreamsUseTheRoute: a stream runs through its route's
// StreamPipeline, retried before it commits.
func TestRouterInterceptors_StreamsUseTheRoute(t *testing.T) {
	s := &flakyStreams{}
	s.n.Store(2)
	addr := listen(t, s)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	rt := policy.Must(policygrpc.NewRoutes(policygrpc.Route{Name: "grpc.testing.TestService", Pipeline: retrying(2, clock), StreamPipeline: retrying(3, clock)}))
	c := dial(t, addr, policygrpc.RouterDialOptions(rt)...)
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, err = stream.CloseAndRecv()
	require.NoError(t, err, "the stream pipeline's 3 attempts outlast 2 failures")
	require.EqualValues(t, 3, s.calls.Load())
}
