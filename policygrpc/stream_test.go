package policygrpc_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
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
	afterHeader  bool // fail after sending the response headers, before any message
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
	if s.fails(n) && s.afterHeader {
		if err := stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n))); err != nil {
			return err
		}
		return errDown // headers sent: the client has committed
	}
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
		if s.fails(n) && s.afterHeader {
			if err := stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n))); err != nil {
				return err
			}
			return errDown // headers sent: the client has committed
		}
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

// grpcGoRetry is a service config that has grpc-go's own retry make up to 3 attempts
// of every TestService method on UNAVAILABLE, to compare Backstop with.
const grpcGoRetry = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// TestStream_CommitsAtResponseHeaders: a server that sends its response headers and
// then fails has committed the stream (gRFC A6): the failure is the caller's, after
// one attempt, whether the caller read the headers first or not, on server-streaming
// and bidi streams alike, as with grpc-go's own retry. A failure after a message is
// the caller's too.
func TestStream_CommitsAtResponseHeaders(t *testing.T) {
	outReq := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 2}}}
	serverStreaming := func(t *testing.T, c testgrpc.TestServiceClient, readHeader bool) ([]int, metadata.MD, error) {
		stream, err := c.StreamingOutputCall(context.Background(), outReq)
		require.NoError(t, err)
		var md metadata.MD
		if readHeader {
			md, err = stream.Header()
			require.NoError(t, err)
		}
		var sizes []int
		for {
			res, err := stream.Recv()
			if err != nil {
				return sizes, md, err
			}
			sizes = append(sizes, len(res.GetPayload().GetBody()))
		}
	}
	bidi := func(t *testing.T, c testgrpc.TestServiceClient, readHeader bool) ([]int, metadata.MD, error) {
		stream, err := c.FullDuplexCall(context.Background())
		require.NoError(t, err)
		require.NoError(t, stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 4}}}))
		var md metadata.MD
		if readHeader {
			md, err = stream.Header()
			require.NoError(t, err)
		}
		res, err := stream.Recv()
		if err != nil {
			return nil, md, err
		}
		return []int{len(res.GetPayload().GetBody())}, md, stream.CloseSend()
	}
	afterHeader := func() *streams { return &streams{failFirst: 1, afterHeader: true} }
	afterMessage := func() *streams { return &streams{failFirst: 1, afterMessage: true} }
	for _, tt := range []struct {
		name       string
		server     func() *streams
		call       func(*testing.T, testgrpc.TestServiceClient, bool) ([]int, metadata.MD, error)
		readHeader bool
		sizes      []int // what the caller received before the failure
	}{
		{"server streaming: headers, then UNAVAILABLE", afterHeader, serverStreaming, false, nil},
		{"server streaming: headers read, then UNAVAILABLE", afterHeader, serverStreaming, true, nil},
		{"server streaming: a message, then UNAVAILABLE", afterMessage, serverStreaming, false, []int{1}},
		{"bidi: headers, then UNAVAILABLE", afterHeader, bidi, false, nil},
		{"bidi: headers read, then UNAVAILABLE", afterHeader, bidi, true, nil},
	} {
		for _, client := range []struct {
			name string
			dial func(t *testing.T, addr string) testgrpc.TestServiceClient
		}{
			{"backstop", func(t *testing.T, addr string) testgrpc.TestServiceClient {
				return streamClient(t, addr, 3, policygrpc.StreamOptions{})
			}},
			{"grpc-go", func(t *testing.T, addr string) testgrpc.TestServiceClient {
				return dial(t, addr, grpc.WithDefaultServiceConfig(grpcGoRetry))
			}},
		} {
			t.Run(tt.name+"/"+client.name, func(t *testing.T) {
				s := tt.server()
				sizes, md, err := tt.call(t, client.dial(t, serveStreams(t, s)), tt.readHeader)
				require.Equal(t, codes.Unavailable, status.Code(err), "the committed attempt's failure reaches the caller: %v", err)
				require.Equal(t, tt.sizes, sizes)
				require.Equal(t, 1, s.attempts, "a stream is not retried once the server's headers (or a message) arrived")
				if tt.readHeader {
					require.Equal(t, []string{"1"}, md.Get("attempt"), "the headers are the first attempt's")
				}
			})
		}
	}
}

// TestStream_HeaderRetriesATrailersOnlyFailure: a first attempt that fails before any
// header (trailers only) has not committed the stream. Header retries it and returns
// the next attempt's headers, as grpc-go's own retry does, and Recv reads that
// attempt's messages.
func TestStream_HeaderRetriesATrailersOnlyFailure(t *testing.T) {
	s := &streams{failFirst: 1}
	stream, err := streamClient(t, serveStreams(t, s), 3, policygrpc.StreamOptions{}).StreamingOutputCall(context.Background(),
		&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 2}}})
	require.NoError(t, err)
	md, err := stream.Header()
	require.NoError(t, err)
	require.NotNil(t, md, "Header returns the second attempt's headers")
	require.Equal(t, 2, s.attempts, "Header retried the trailers-only failure")
	var sizes []int
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		sizes = append(sizes, len(res.GetPayload().GetBody()))
	}
	require.Equal(t, []int{1, 2}, sizes)
	require.Equal(t, 2, s.attempts, "the trailers-only failure was retried")
}
