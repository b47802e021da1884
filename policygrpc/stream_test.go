package policygrpc_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
)

// streams is a TestService whose streaming methods fail their first failFirst
// attempts with UNAVAILABLE, before or after sending a first response.
type streams struct {
	testgrpc.UnimplementedTestServiceServer
	failFirst    int  // attempts that fail
	afterMessage bool // fail after sending one response (the client has committed)
	mu           sync.Mutex
	attempts     int
	received     [][]int32 // per attempt, the payload sizes received
}

func (s *streams) begin() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	s.received = append(s.received, nil)
	return s.attempts
}

func (s *streams) got(n int, size int32) {
	s.mu.Lock()
	s.received[n-1] = append(s.received[n-1], size)
	s.mu.Unlock()
}

func (s *streams) fails(n int) bool { return n <= s.failFirst }

var errDown = status.Error(codes.Unavailable, "restarting")

func (s *streams) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	n := s.begin()
	var total int32
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		size := int32(len(req.GetPayload().GetBody()))
		s.got(n, size)
		total += size
	}
	if s.fails(n) {
		return errDown
	}
	return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: total})
}

func (s *streams) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	n := s.begin()
	if s.fails(n) && !s.afterMessage {
		return errDown
	}
	for i, p := range req.GetResponseParameters() {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
		if i == 0 && s.fails(n) {
			return errDown // after the first message: the client has committed
		}
	}
	return nil
}

func (s *streams) FullDuplexCall(stream grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	n := s.begin()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		size := req.GetResponseParameters()[0].GetSize()
		s.got(n, size)
		if s.fails(n) {
			return errDown // having read one message, before answering any
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, size)}}); err != nil {
			return err
		}
	}
}

func serveStreams(t *testing.T, s *streams) string { return listen(t, s) }

func streamClient(t *testing.T, addr string, attempts int, o policygrpc.StreamOptions) testgrpc.TestServiceClient {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	return dial(t, addr, grpc.WithChainStreamInterceptor(policygrpc.RetryStreamClientInterceptor(retrying(attempts, clock), o)))
}

func payload(n int) *testgrpc.Payload { return &testgrpc.Payload{Body: make([]byte, n)} }

// TestStream_ClientStreamingReplaysWhatWasSent: the first attempt fails after reading
// every message; the retry replays all three, in order, with the half-close.
func TestStream_ClientStreamingReplaysWhatWasSent(t *testing.T) {
	s := &streams{failFirst: 1}
	c := streamClient(t, serveStreams(t, s), 3, policygrpc.StreamOptions{})
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	for _, n := range []int{1, 2, 3} {
		require.NoError(t, stream.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(n)}))
	}
	res, err := stream.CloseAndRecv()
	require.NoError(t, err)
	require.Equal(t, int32(6), res.GetAggregatedPayloadSize())
	require.Equal(t, 2, s.attempts)
	require.Equal(t, [][]int32{{1, 2, 3}, {1, 2, 3}}, s.received, "the retry saw every message again, in order")
}

// TestStream_ServerStreamingRetriesBeforeCommitOnly: a failure before the first
// response is retried; one after it reaches the caller untouched.
func TestStream_ServerStreamingRetriesBeforeCommitOnly(t *testing.T) {
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}}
	read := func(stream grpc.ServerStreamingClient[testgrpc.StreamingOutputCallResponse]) ([]int, error) {
		var sizes []int
		for {
			res, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return sizes, nil
				}
				return sizes, err
			}
			sizes = append(sizes, len(res.GetPayload().GetBody()))
		}
	}

	before := &streams{failFirst: 1}
	stream, err := streamClient(t, serveStreams(t, before), 3, policygrpc.StreamOptions{}).StreamingOutputCall(context.Background(), req)
	require.NoError(t, err)
	sizes, err := read(stream)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, sizes, "every response once")
	require.Equal(t, 2, before.attempts)

	after := &streams{failFirst: 1, afterMessage: true}
	stream, err = streamClient(t, serveStreams(t, after), 3, policygrpc.StreamOptions{}).StreamingOutputCall(context.Background(), req)
	require.NoError(t, err)
	sizes, err = read(stream)
	require.Equal(t, codes.Unavailable, status.Code(err), "after the commit the error is the caller's: %v", err)
	require.Equal(t, []int{1}, sizes)
	require.Equal(t, 1, after.attempts, "a committed stream is not retried")
}

// TestStream_BidiReplaysAndAnswers: the first attempt reads one message and fails; the
// retry replays it and the conversation goes on.
func TestStream_BidiReplaysAndAnswers(t *testing.T) {
	s := &streams{failFirst: 1}
	c := streamClient(t, serveStreams(t, s), 3, policygrpc.StreamOptions{})
	stream, err := c.FullDuplexCall(context.Background())
	require.NoError(t, err)
	for _, n := range []int32{4, 5} {
		require.NoError(t, stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: n}}}))
		res, err := stream.Recv()
		require.NoError(t, err)
		require.Len(t, res.GetPayload().GetBody(), int(n))
	}
	require.NoError(t, stream.CloseSend())
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 2, s.attempts)
	require.Equal(t, []int32{4}, s.received[0])
	require.Equal(t, []int32{4, 5}, s.received[1], "the first message replayed, then the second")
}

// TestStream_ReplayBufferExceededCommits: with a replay buffer smaller than what was
// sent, the stream commits and its failure is not retried.
func TestStream_ReplayBufferExceededCommits(t *testing.T) {
	s := &streams{failFirst: 1}
	c := streamClient(t, serveStreams(t, s), 3, policygrpc.StreamOptions{MaxReplayBytes: 8})
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(64)}))
	_, err = stream.CloseAndRecv()
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 1, s.attempts, "64 bytes sent, 8 may be replayed: no retry")
}

// TestStream_GivesUpWithTheLastStatus: every attempt fails; after the retry's 3 the
// caller gets UNAVAILABLE.
func TestStream_GivesUpWithTheLastStatus(t *testing.T) {
	s := &streams{failFirst: 100}
	c := streamClient(t, serveStreams(t, s), 3, policygrpc.StreamOptions{})
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(1)}))
	_, err = stream.CloseAndRecv()
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 3, s.attempts)
}
