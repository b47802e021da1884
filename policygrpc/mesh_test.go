package policygrpc_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
)

// meshEvents keeps "kind stage attempt" of the attempt and retry events it sees.
type meshEvents struct {
	mu    sync.Mutex
	lines []string
}

func (r *meshEvents) Observe(e event.Event) {
	if e.Kind != event.AttemptEnd && e.Kind != event.RetryScheduled {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, e.Kind.String()+" "+e.Stage+" "+strconv.Itoa(e.Attempt))
}

func (r *meshEvents) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// meshSaid answers with code after setting the response header Envoy sets with
// include_attempt_count_in_response: attempts upstream requests were made.
func meshSaid(attempts string, code codes.Code) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		if err := grpc.SetHeader(ctx, metadata.Pairs(policygrpc.MetadataEnvoyAttempt, attempts)); err != nil {
			return err
		}
		if code == codes.OK {
			return nil
		}
		return status.Error(code, "from the mesh")
	}
}

// TestUnary_TellsEnvoyNotToRetryBeneathTheOwner: each attempt of a retrying
// pipeline carries x-envoy-max-retries: 0 as metadata; with MeshNone, none.
func TestUnary_TellsEnvoyNotToRetryBeneathTheOwner(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	s := serve(t, &server{answer: func(_ context.Context, n int) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}})
	c := dial(t, s.addr, policygrpc.DialOptions(retrying(3, clock), policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	none := dial(t, s.addr, policygrpc.DialOptions(retrying(3, clock), policygrpc.Options{Mesh: callpath.MeshNone})...)
	_, err = none.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	require.Equal(t, []string{"0", "0", ""}, s.values(policygrpc.MetadataEnvoyMaxRetries))
}

// TestUnary_MeshOwnsOneAttemptCountedThrice: with MeshEnvoyOwns the call makes one
// attempt, the server below sees it as owned, and the mesh's three attempts reach
// the observer and the budget.
func TestUnary_MeshOwnsOneAttemptCountedThrice(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	s := serve(t, &server{answer: meshSaid("3", codes.Unavailable)})
	b := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
	rec := &meshEvents{}
	p := retrying(3, clock, b).With(policy.Observe(rec))
	c := dial(t, s.addr, policygrpc.DialOptions(p, policygrpc.Options{Mesh: callpath.MeshEnvoyOwns, MeshBudget: b, MeshObserver: rec})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 1, s.calls())
	require.Equal(t, []string{""}, s.values(policygrpc.MetadataEnvoyMaxRetries))
	require.Equal(t, []string{"1"}, s.values(policygrpc.MetadataAttempt), "owned: the server below fails fast")
	require.Equal(t, []string{
		"attempt_end mesh 1", "retry_scheduled mesh 2",
		"attempt_end mesh 2", "retry_scheduled mesh 3",
		"attempt_end retry 1",
	}, rec.got())
	// tokens 8 = 10 − 2 (the mesh's failed attempts 1, 2). The third failed after
	// response headers: the call committed (gRFC A6), and the retry does not count
	// a failure it may not retry.
	require.InDelta(t, 8, b.Tokens(), 1e-9)
}

// TestUnary_CountsAMeshThatRetriedOnSuccess: a mesh's retries are counted from the
// response header of a call that succeeded too.
func TestUnary_CountsAMeshThatRetriedOnSuccess(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	s := serve(t, &server{answer: meshSaid("2", codes.OK)})
	rec := &meshEvents{}
	c := dial(t, s.addr, policygrpc.DialOptions(retrying(3, clock), policygrpc.Options{MeshObserver: rec})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	require.Equal(t, []string{"attempt_end mesh 1", "retry_scheduled mesh 2"}, rec.got())
}

// meshStream answers every stream with the mesh's attempt count, then code.
type meshStream struct {
	testgrpc.UnimplementedTestServiceServer
	mu      sync.Mutex
	streams int
	max     []string
}

func (s *meshStream) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	s.mu.Lock()
	s.streams++
	s.max = append(s.max, append(md.Get(policygrpc.MetadataEnvoyMaxRetries), "")[0])
	s.mu.Unlock()
	if err := stream.SetHeader(metadata.Pairs(policygrpc.MetadataEnvoyAttempt, "3")); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "from the mesh")
}

// TestStream_MeshOwnsOneAttemptCountedThrice: a stream the mesh owns is opened once,
// and the mesh's attempts are counted; one Backstop owns carries x-envoy-max-retries.
// Each stream fails after its response headers, so it commits: it is not retried.
func TestStream_MeshOwnsOneAttemptCountedThrice(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	s := &meshStream{}
	addr := listen(t, s)
	rec := &meshEvents{}
	p := retrying(3, clock).With(policy.Observe(rec))
	for _, tc := range []struct {
		mesh    callpath.Mesh
		streams int
	}{{callpath.MeshEnvoyOwns, 1}, {callpath.MeshBackstopOwns, 1}} {
		c := dial(t, addr, grpc.WithChainStreamInterceptor(policygrpc.RetryStreamClientInterceptor(p,
			policygrpc.StreamOptions{Options: policygrpc.Options{Mesh: tc.mesh, MeshObserver: rec}})), grpc.WithDisableRetry())
		stream, err := c.StreamingInputCall(context.Background())
		require.NoError(t, err)
		_, err = stream.CloseAndRecv()
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", tc.mesh)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 2, s.streams, "one stream the mesh owns, then one Backstop does")
	require.Equal(t, []string{"", "0"}, s.max)
	// The pipeline's own attempt_end comes from its goroutine, which may end after
	// CloseAndRecv returned: only the mesh's are compared.
	var mesh []string
	for _, l := range rec.got() {
		if strings.Contains(l, " mesh ") {
			mesh = append(mesh, l)
		}
	}
	one := []string{"attempt_end mesh 1", "retry_scheduled mesh 2", "attempt_end mesh 2", "retry_scheduled mesh 3"}
	require.Equal(t, append(one, one...), mesh, "each stream's three attempts, counted once")
}
