package policygrpc_test

// The conformance suite: each scenario of grpc-go's own retry tests (test/retry_test.go,
// grpc-go v1.83.2), written as a table here, runs against both retry owners on the same
// service config and the same loopback server — grpc-go's built-in retry, and
// Backstop's interceptors on a channel with grpc.WithDisableRetry. What the user can
// observe must be the same: the attempts the server saw, the final status, the
// grpc-previous-rpc-attempts each attempt carried, what the throttling bucket allowed.
// A difference fails the test unless the scenario is in deliberate, with its reason.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
)

// deliberate lists the scenarios whose outcome differs between the owners on purpose,
// each with its reason. A listed scenario must still differ: the test fails if the
// owners agree, so the table cannot go stale.
var deliberate = map[string]string{
	"streaming/pushback with a leading zero": "A6 defines grpc-retry-pushback-ms as an integer " +
		"\"with no unnecessary leading zeros\"; grpc-go reads \"010\" as 10 ms and retries, " +
		"Backstop reads it as malformed: do not retry.",
	"parse/retryPolicy and hedgingPolicy together": "A6 allows one of them per method; grpc-go " +
		"does not read hedgingPolicy at all, so it accepts both.",
	"throttling counts committed failures": "A6 counts every failed RPC with a retryable " +
		"code; grpc-go counts only those that ended in trailers only, and none whose server " +
		"sent headers first. Backstop counts them all, as A6 says.",
	"retry while blocked": "Once a cancelled stream has ended, grpc-go's next Recv returns the " +
		"status of the attempt it last held (the failed first one's ALREADY_EXISTS); Backstop's " +
		"repeats CANCELLED, the status the RPC ended with. A6 says nothing of it; grpc-go's own " +
		"test asserts only that the call ends CANCELLED and that nothing panics.",
	"parse/retryThrottling maxTokens 1001 without methodConfig": "grpc-go checks retryThrottling " +
		"only in a config with a methodConfig; A6 bounds maxTokens to (0, 1000] in every config, " +
		"and so does Backstop.",
	"parse/hedgingPolicy without maxAttempts": "grpc-go does not implement hedging and reads no " +
		"hedgingPolicy; Backstop hedges, and validates the policy as A6 says.",
}

// owner is one retry owner: how a channel using it is dialled.
type owner struct {
	name string
	dial func(t *testing.T, addr, sc string, maxCallAttempts int, extra ...grpc.DialOption) *channel
}

// channel is a client of the scripted server, and the throttling bucket's tokens when
// the owner exposes them (Backstop does; grpc-go's are only seen in what they allow).
type channel struct {
	testgrpc.TestServiceClient
	tokens func() float64
}

var owners = []owner{
	{"grpc-go", func(t *testing.T, addr, sc string, maxCallAttempts int, extra ...grpc.DialOption) *channel {
		opts := []grpc.DialOption{grpc.WithDefaultServiceConfig(sc)}
		if maxCallAttempts != 0 {
			opts = append(opts, grpc.WithMaxCallAttempts(maxCallAttempts))
		}
		return &channel{TestServiceClient: dial(t, addr, append(opts, extra...)...)}
	}},
	{"backstop", func(t *testing.T, addr, sc string, maxCallAttempts int, extra ...grpc.DialOption) *channel {
		cfg, err := policygrpc.ParseServiceConfigWith([]byte(sc), policygrpc.ParseOptions{MaxCallAttempts: maxCallAttempts})
		require.NoError(t, err)
		opts := cfg.DialOptions()
		if maxCallAttempts != 0 {
			// The channel is dialled as for grpc-go; the option changes nothing with
			// grpc's retry disabled, and ParseOptions carries it to Backstop.
			opts = append(opts, grpc.WithMaxCallAttempts(maxCallAttempts))
		}
		ch := &channel{TestServiceClient: dial(t, addr, append(opts, extra...)...)}
		if b := cfg.Budget(); b != nil {
			ch.tokens = b.Tokens
		}
		return ch
	}},
}

// script is the server of the suite: its handlers are set per scenario, and it counts
// the calls it answers and the grpc-previous-rpc-attempts each carried.
type script struct {
	testgrpc.UnimplementedTestServiceServer
	mu     sync.Mutex // guards the fields below; held through a whole duplex call
	unary  func(ctx context.Context, n int) error
	duplex func(stream testgrpc.TestService_FullDuplexCallServer, n int) error
	calls  int
	prev   []string // per call, its grpc-previous-rpc-attempts ("" if none)
}

func (s *script) reset(unary func(context.Context, int) error, duplex func(testgrpc.TestService_FullDuplexCallServer, int) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unary, s.duplex, s.calls, s.prev = unary, duplex, 0, nil
}

// begin counts a call and returns its index from 0.
func (s *script) begin(ctx context.Context) int {
	v := metadata.ValueFromIncomingContext(ctx, policygrpc.MetadataPreviousAttempts)
	s.prev = append(s.prev, strings.Join(v, ","))
	s.calls++
	return s.calls - 1
}

func (s *script) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unary(ctx, s.begin(ctx)); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

func (s *script) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unary(ctx, s.begin(ctx)); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (s *script) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplex(stream, s.begin(stream.Context()))
}

// seen returns the calls answered and their previous-attempt counts.
func (s *script) seen() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, slices.Clone(s.prev)
}

// retryConfig is the service config of grpc-go's tests: maxAttempts attempts 10 ms
// apart on the codes given, spelt with the capitals those tests use (encoding/json
// matches field names in any case, in grpc-go and in Backstop).
func retryConfig(maxAttempts int, codes string, extra string) string {
	return fmt.Sprintf(`{
  "methodConfig": [{
    "name": [{"service": "grpc.testing.TestService"}],
    "waitForReady": true,
    "retryPolicy": {
      "MaxAttempts": %d,
      "InitialBackoff": ".01s",
      "MaxBackoff": ".01s",
      "BackoffMultiplier": 1.0,
      "RetryableStatusCodes": [%s]
    }
  }]%s}`, maxAttempts, codes, extra)
}

// compare runs one scenario against both owners and checks that their outcomes are
// the same, or differ as deliberate says.
func compare(t *testing.T, name string, run func(t *testing.T, o owner) string) {
	t.Helper()
	got := map[string]string{}
	for _, o := range owners {
		t.Run(o.name, func(t *testing.T) {
			got[o.name] = run(t, o)
			t.Logf("outcome: %s", got[o.name])
		})
	}
	agree(t, name, got["grpc-go"], got["backstop"])
}

// agree checks that the owners' outcomes g and b of scenario name are the same, or
// differ as deliberate says.
func agree(t *testing.T, name, g, b string) {
	t.Helper()
	reason, listed := deliberate[name]
	switch {
	case listed && g == b:
		t.Errorf("%s: the owners agree (%s), but deliberate lists a difference: %s", name, g, reason)
	case listed:
		t.Logf("%s: deliberate difference: %s\n grpc-go:  %s\n backstop: %s", name, reason, g, b)
	case g != b:
		t.Errorf("%s: the owners differ\n grpc-go:  %s\n backstop: %s", name, g, b)
	}
}

// TestConformance_RetryUnary is grpc-go's TestRetryUnary: seven calls on a server
// whose answers, by call, are OK at 0, 2 and 5, INTERNAL (not retried) at 6, 8 and 11,
// and ALREADY_EXISTS (retried) otherwise; four attempts at most.
func TestConformance_RetryUnary(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	sc := retryConfig(4, `"ALREADY_EXISTS"`, "")
	wants := []struct {
		code  codes.Code
		calls int // the server's calls so far
	}{
		{codes.OK, 1},
		{codes.OK, 3},
		{codes.OK, 6},
		{codes.Internal, 7},
		{codes.Internal, 9},
		{codes.Internal, 12},
		{codes.AlreadyExists, 16}, // four attempts, all failed
	}
	compare(t, "unary", func(t *testing.T, o owner) string {
		srv.reset(func(_ context.Context, n int) error {
			switch n {
			case 0, 2, 5:
				return nil
			case 6, 8, 11:
				return status.Error(codes.Internal, "not retryable")
			}
			return status.Error(codes.AlreadyExists, "retryable")
		}, nil)
		ch := o.dial(t, addr, sc, 0)
		var out []string
		for i, w := range wants {
			_, err := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
			calls, _ := srv.seen()
			if status.Code(err) != w.code || calls != w.calls {
				t.Errorf("call %d: EmptyCall = %v after %d server calls; want %v after %d", i, err, calls, w.code, w.calls)
			}
			out = append(out, fmt.Sprintf("%v@%d", status.Code(err), calls))
		}
		_, prev := srv.seen()
		return fmt.Sprintf("%v prev=%q", out, prev)
	})
}

// TestConformance_RetryThrottling is grpc-go's TestRetryThrottling: retryThrottling
// {maxTokens 10, tokenRatio 0.5}; the server succeeds at calls 0, 3, 6, 10–14, 16 and
// 18, and is UNAVAILABLE (retried) otherwise. A retry may start while the tokens are
// above 5; Backstop's bucket is checked against the count at each step too.
func TestConformance_RetryThrottling(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	sc := retryConfig(4, `"UNAVAILABLE"`, `, "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}`)
	wants := []struct {
		code   codes.Code
		calls  int
		tokens float64
	}{
		{codes.OK, 1, 10},
		{codes.OK, 4, 8.5},         // 10 − 2 failures + 0.5
		{codes.OK, 7, 7},           // 8.5 − 2 + 0.5
		{codes.Unavailable, 9, 5},  // the first failure is retried; the second leaves 5: no retry
		{codes.Unavailable, 10, 4}, // 5 is not above 5: no retry
		{codes.OK, 11, 4.5},        //
		{codes.OK, 12, 5},          //
		{codes.OK, 13, 5.5},        //
		{codes.OK, 14, 6},          //
		{codes.OK, 15, 6.5},        //
		{codes.OK, 17, 6},          // 6.5 − 1 + 0.5
		{codes.Unavailable, 18, 5}, // 6 − 1 = 5: no retry
	}
	compare(t, "throttling", func(t *testing.T, o owner) string {
		srv.reset(func(_ context.Context, n int) error {
			switch n {
			case 0, 3, 6, 10, 11, 12, 13, 14, 16, 18:
				return nil
			}
			return status.Error(codes.Unavailable, "retryable")
		}, nil)
		ch := o.dial(t, addr, sc, 0)
		var out []string
		for i, w := range wants {
			_, err := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
			calls, _ := srv.seen()
			if status.Code(err) != w.code || calls != w.calls {
				t.Errorf("call %d: EmptyCall = %v after %d server calls; want %v after %d", i, err, calls, w.code, w.calls)
			}
			if ch.tokens != nil {
				if got := ch.tokens(); got != w.tokens {
					t.Errorf("call %d: tokens = %v; want %v", i, got, w.tokens)
				}
			}
			out = append(out, fmt.Sprintf("%v@%d", status.Code(err), calls))
		}
		return fmt.Sprint(out)
	})
}

// TestConformance_ThrottlingCountsCommittedFailures: six calls fail with UNAVAILABLE
// after the server sent its headers, so none is retried; then a call fails in
// trailers only, and would be retried if the tokens allowed it.
func TestConformance_ThrottlingCountsCommittedFailures(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	sc := retryConfig(4, `"UNAVAILABLE"`, `, "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.5}`)
	compare(t, "throttling counts committed failures", func(t *testing.T, o owner) string {
		srv.reset(func(ctx context.Context, n int) error {
			switch {
			case n < 6:
				_ = grpc.SendHeader(ctx, metadata.Pairs("k", "v"))
				return status.Error(codes.Unavailable, "after headers")
			case n == 6:
				return status.Error(codes.Unavailable, "trailers only")
			}
			return nil
		}, nil)
		ch := o.dial(t, addr, sc, 0)
		var out []string
		for range 7 {
			_, err := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
			calls, _ := srv.seen()
			out = append(out, fmt.Sprintf("%v@%d", status.Code(err), calls))
		}
		if ch.tokens != nil {
			out = append(out, fmt.Sprintf("tokens %v", ch.tokens())) // 10 − 7 failures
		}
		return fmt.Sprint(out)
	})
}

// TestConformance_MaxCallAttempts is grpc-go's TestMaxCallAttempts: the client's bound
// (grpc.WithMaxCallAttempts, and ParseOptions.MaxCallAttempts for Backstop) against
// the service config's maxAttempts, for a stream and a unary call that always fail.
func TestConformance_MaxCallAttempts(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	for _, tt := range []struct{ service, client, want int }{
		{9, 4, 4},
		{9, 7, 7},
		{3, 10, 3},
		{8, -1, 5}, // below 2: the default, 5
		{3, 0, 3},
	} {
		name := fmt.Sprintf("maxAttempts %d, client %d", tt.service, tt.client)
		t.Run(name, func(t *testing.T) {
			compare(t, "max call attempts/"+name, func(t *testing.T, o owner) string {
				down := status.Error(codes.Unavailable, "down")
				srv.reset(func(context.Context, int) error { return down },
					func(testgrpc.TestService_FullDuplexCallServer, int) error { return down })
				ch := o.dial(t, addr, retryConfig(tt.service, `"UNAVAILABLE"`, ""), tt.client)
				stream, err := ch.FullDuplexCall(t.Context())
				require.NoError(t, err)
				_, err = stream.Recv()
				streamCalls, _ := srv.seen()
				if status.Code(err) != codes.Unavailable || streamCalls != tt.want {
					t.Errorf("stream: Recv = %v after %d attempts; want UNAVAILABLE after %d", err, streamCalls, tt.want)
				}
				srv.reset(func(context.Context, int) error { return down }, nil)
				_, uerr := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
				unaryCalls, prev := srv.seen()
				if status.Code(uerr) != codes.Unavailable || unaryCalls != tt.want {
					t.Errorf("unary: EmptyCall = %v after %d attempts; want UNAVAILABLE after %d", uerr, unaryCalls, tt.want)
				}
				return fmt.Sprintf("stream %v@%d, unary %v@%d prev=%q", status.Code(err), streamCalls, status.Code(uerr), unaryCalls, prev)
			})
		})
	}
}

// TestConformance_UnaryCommits: a unary call commits when the server sends its
// response headers, and a request larger than the retry buffer is not retried.
func TestConformance_UnaryCommits(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	sc := retryConfig(4, `"UNAVAILABLE"`, "")
	for _, tt := range []struct {
		name    string
		fail    func(ctx context.Context) error
		payload int
		opts    []grpc.DialOption
		want    int // attempts
	}{
		{name: "trailers only: retried", fail: func(context.Context) error { return nil }, want: 2},
		{name: "after response headers: committed", fail: func(ctx context.Context) error {
			return grpc.SendHeader(ctx, metadata.Pairs("k", "v"))
		}, want: 1},
		{name: "request within the buffer: retried", payload: 150, want: 2,
			fail: func(context.Context) error { return nil },
			opts: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxRetryRPCBufferSize(200))}},
		{name: "request past the buffer: committed", payload: 500, want: 1,
			fail: func(context.Context) error { return nil },
			opts: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxRetryRPCBufferSize(200))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			compare(t, "unary commits/"+tt.name, func(t *testing.T, o owner) string {
				srv.reset(func(ctx context.Context, n int) error {
					if n > 0 {
						return nil
					}
					if err := tt.fail(ctx); err != nil {
						return err
					}
					return status.Error(codes.Unavailable, "first attempt fails")
				}, nil)
				ch := o.dial(t, addr, sc, 0, tt.opts...)
				_, err := ch.UnaryCall(t.Context(), &testgrpc.SimpleRequest{Payload: payload(tt.payload)})
				calls, prev := srv.seen()
				if calls != tt.want {
					t.Errorf("UnaryCall = %v after %d attempts; want %d", err, calls, tt.want)
				}
				return fmt.Sprintf("%v@%d prev=%q", status.Code(err), calls, prev)
			})
		})
	}
}

// Server and client operations of the streaming scenarios, as in grpc-go's
// TestRetryStreaming: the server's run in turn across the attempts of one stream.
type (
	serverOp func(stream testgrpc.TestService_FullDuplexCallServer) error
	clientOp func(stream testgrpc.TestService_FullDuplexCallClient) error
)

func streamReq(b byte) *testgrpc.StreamingOutputCallRequest {
	return &testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte{b}}}
}

func streamRes(b byte) *testgrpc.StreamingOutputCallResponse {
	return &testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{b}}}
}

func sAttempts(n string) serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		if got := strings.Join(metadata.ValueFromIncomingContext(stream.Context(), policygrpc.MetadataPreviousAttempts), ","); got != n {
			return status.Errorf(codes.Internal, "server: grpc-previous-rpc-attempts = %q; want %q", got, n)
		}
		return nil
	}
}

func sReqPayload(p *testgrpc.Payload) serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		want := &testgrpc.StreamingOutputCallRequest{Payload: p}
		if got, err := stream.Recv(); err != nil || !proto.Equal(got, want) {
			return status.Errorf(codes.Internal, "server: Recv() = %v, %v; want %v", got, err, want)
		}
		return nil
	}
}

func sReq(b byte) serverOp { return sReqPayload(streamReq(b).Payload) }

func sHdr(v string) serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		return stream.SendHeader(metadata.Pairs("test_header", v))
	}
}

func sRes(b byte) serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		if err := stream.Send(streamRes(b)); err != nil {
			return status.Errorf(codes.Internal, "server: Send = %v", err)
		}
		return nil
	}
}

func sErr(c codes.Code) serverOp {
	return func(testgrpc.TestService_FullDuplexCallServer) error { return status.Error(c, "scripted error") }
}

func sCloseSend() serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		if msg, err := stream.Recv(); msg != nil || !errors.Is(err, io.EOF) {
			return status.Errorf(codes.Internal, "server: Recv() = %v, %v; want io.EOF", msg, err)
		}
		return nil
	}
}

func sPushback(vs ...string) serverOp {
	return func(stream testgrpc.TestService_FullDuplexCallServer) error {
		stream.SetTrailer(metadata.MD{policygrpc.MetadataPushback: vs})
		return nil
	}
}

func cReqPayload(p *testgrpc.Payload) clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error {
		if err := stream.Send(&testgrpc.StreamingOutputCallRequest{Payload: p}); err != nil {
			return fmt.Errorf("client: Send = %v", err)
		}
		return nil
	}
}

func cReq(b byte) clientOp { return cReqPayload(streamReq(b).Payload) }

func cRes(b byte) clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error {
		if got, err := stream.Recv(); err != nil || !proto.Equal(got, streamRes(b)) {
			return fmt.Errorf("client: Recv() = %v, %v; want %v", got, err, streamRes(b))
		}
		return nil
	}
}

// cErr receives the end of the stream: io.EOF counts as OK.
func cErr(c codes.Code) clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error {
		res, err := stream.Recv()
		got := status.Code(err)
		if errors.Is(err, io.EOF) {
			got = codes.OK
		}
		if res != nil || got != c {
			return fmt.Errorf("client: Recv() = %v, %v; want %v", res, err, c)
		}
		return nil
	}
}

func cCloseSend() clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error { return stream.CloseSend() }
}

// cHdr reads the headers; want is the test_header they must hold ("" for none).
func cHdr(want string) clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error {
		md, err := stream.Header()
		if err != nil {
			return fmt.Errorf("client: Header() = %v", err)
		}
		if got := strings.Join(md.Get("test_header"), ","); got != want {
			return fmt.Errorf("client: Header() = %v; want test_header %q", md, want)
		}
		return nil
	}
}

func cCtx() clientOp {
	return func(stream testgrpc.TestService_FullDuplexCallClient) error {
		_ = stream.Context()
		return nil
	}
}

// TestConformance_RetryStreaming is grpc-go's TestRetryStreaming, with a retry buffer
// of 200 bytes on both channels; its one-second pushback is 10 ms here, and its
// elapsed-time check is left out (the suite times nothing). Each case runs the server's
// operations in turn across the stream's attempts; every one must have run.
func TestConformance_RetryStreaming(t *testing.T) {
	large := &testgrpc.Payload{Body: make([]byte, 500)}
	for _, tt := range []struct {
		desc      string
		serverOps []serverOp
		clientOps []clientOp
	}{{
		desc:      "non-retryable error code",
		serverOps: []serverOp{sReq(1), sErr(codes.Internal)},
		clientOps: []clientOp{cReq(1), cErr(codes.Internal)},
	}, {
		desc:      "one retry necessary",
		serverOps: []serverOp{sReq(1), sErr(codes.Unavailable), sReq(1), sAttempts("1"), sRes(1)},
		clientOps: []clientOp{cReq(1), cRes(1), cErr(codes.OK)},
	}, {
		desc: "exceed max attempts (4); check attempts header on server",
		serverOps: []serverOp{
			sReq(1), sErr(codes.Unavailable),
			sReq(1), sAttempts("1"), sErr(codes.Unavailable),
			sAttempts("2"), sReq(1), sErr(codes.Unavailable),
			sAttempts("3"), sReq(1), sErr(codes.Unavailable),
		},
		clientOps: []clientOp{cReq(1), cErr(codes.Unavailable)},
	}, {
		desc:      "multiple requests",
		serverOps: []serverOp{sReq(1), sReq(2), sErr(codes.Unavailable), sReq(1), sReq(2), sRes(5)},
		clientOps: []clientOp{cReq(1), cReq(2), cRes(5), cErr(codes.OK)},
	}, {
		desc: "multiple successive requests",
		serverOps: []serverOp{
			sReq(1), sErr(codes.Unavailable),
			sReq(1), sReq(2), sErr(codes.Unavailable),
			sReq(1), sReq(2), sReq(3), sRes(5),
		},
		clientOps: []clientOp{cReq(1), cReq(2), cReq(3), cRes(5), cErr(codes.OK)},
	}, {
		desc:      "no retry after receiving",
		serverOps: []serverOp{sReq(1), sErr(codes.Unavailable), sReq(1), sRes(3), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cRes(3), cErr(codes.Unavailable)},
	}, {
		desc:      "retry via Header",
		serverOps: []serverOp{sReq(1), sErr(codes.Unavailable), sReq(1), sAttempts("1")},
		clientOps: []clientOp{cReq(1), cHdr(""), cErr(codes.OK)},
	}, {
		desc:      "Header returns the retried attempt's headers",
		serverOps: []serverOp{sReq(1), sErr(codes.Unavailable), sReq(1), sHdr("second"), sRes(2)},
		clientOps: []clientOp{cReq(1), cHdr("second"), cRes(2), cErr(codes.OK)},
	}, {
		desc:      "no retry after header",
		serverOps: []serverOp{sReq(1), sHdr("first"), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cHdr("first"), cErr(codes.Unavailable)},
	}, {
		desc:      "no retry after context",
		serverOps: []serverOp{sReq(1), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cCtx(), cErr(codes.Unavailable)},
	}, {
		desc: "replaying close send",
		serverOps: []serverOp{
			sReq(1), sReq(2), sCloseSend(), sErr(codes.Unavailable),
			sReq(1), sReq(2), sCloseSend(), sRes(1), sRes(3), sRes(5),
		},
		clientOps: []clientOp{cReq(1), cReq(2), cCloseSend(), cRes(1), cRes(3), cRes(5), cErr(codes.OK)},
	}, {
		desc:      "negative server pushback: no retry",
		serverOps: []serverOp{sReq(1), sPushback("-1"), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cErr(codes.Unavailable)},
	}, {
		desc:      "non-numeric server pushback: no retry",
		serverOps: []serverOp{sReq(1), sPushback("xxx"), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cErr(codes.Unavailable)},
	}, {
		desc:      "multiple server pushback values: no retry",
		serverOps: []serverOp{sReq(1), sPushback("100", "10"), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReq(1), cErr(codes.Unavailable)},
	}, {
		desc:      "server pushback: delayed retry",
		serverOps: []serverOp{sReq(1), sPushback("10"), sErr(codes.Unavailable), sReq(1), sRes(2)},
		clientOps: []clientOp{cReq(1), cRes(2), cErr(codes.OK)},
	}, {
		desc:      "pushback with a leading zero",
		serverOps: []serverOp{sReq(1), sPushback("010"), sErr(codes.Unavailable), sReq(1), sRes(2)},
		clientOps: []clientOp{cReq(1), cRes(2), cErr(codes.OK)},
	}, {
		desc:      "overflowing buffer: no retry",
		serverOps: []serverOp{sReqPayload(large), sErr(codes.Unavailable)},
		clientOps: []clientOp{cReqPayload(large), cErr(codes.Unavailable)},
	}} {
		t.Run(tt.desc, func(t *testing.T) {
			srv := &script{}
			addr := listen(t, srv)
			compare(t, "streaming/"+tt.desc, func(t *testing.T, o owner) string {
				next := 0 // the server's next operation, across attempts
				srv.reset(nil, func(stream testgrpc.TestService_FullDuplexCallServer, _ int) error {
					for next < len(tt.serverOps) {
						op := tt.serverOps[next]
						next++
						if err := op(stream); err != nil {
							return err
						}
					}
					return nil
				})
				ch := o.dial(t, addr, retryConfig(4, `"UNAVAILABLE"`, ""), 0,
					grpc.WithDefaultCallOptions(grpc.MaxRetryRPCBufferSize(200)))
				stream, err := ch.FullDuplexCall(t.Context())
				require.NoError(t, err)
				var failed error
				for j, op := range tt.clientOps {
					if failed = op(stream); failed != nil {
						failed = fmt.Errorf("client op %d: %w", j, failed)
						break
					}
				}
				calls, prev := srv.seen()
				srv.mu.Lock()
				ran := next
				srv.mu.Unlock()
				return fmt.Sprintf("client=%v server ops %d/%d attempts=%d prev=%q", failed, ran, len(tt.serverOps), calls, prev)
			})
		})
	}
}

// TestConformance_RetryStats is grpc-go's TestRetryStats without its refused stream
// (a transparent retry, which grpc-go makes beneath Backstop's interceptor as well):
// a stats.Handler on the channel sees the same events for both owners — one RPC per
// attempt, the first failing in trailers only with a 10 ms pushback, none of them a
// transparent retry — and the second attempt carries grpc-previous-rpc-attempts 1.
func TestConformance_RetryStats(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	compare(t, "stats", func(t *testing.T, o owner) string {
		srv.reset(func(ctx context.Context, n int) error {
			if n == 0 {
				_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, "10"))
				return status.Error(codes.Unavailable, "unavailable retry")
			}
			return nil
		}, nil)
		h := &statsRecorder{}
		ch := o.dial(t, addr, retryConfig(4, `"UNAVAILABLE"`, ""), 0, grpc.WithStatsHandler(h))
		_, err := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
		require.NoError(t, err)
		h.mu.Lock()
		defer h.mu.Unlock()
		// Within an attempt the events race (a payload sent, headers received), so
		// each attempt's are compared as a sorted set.
		want := []string{"Begin End OutHeader OutPayload InTrailer", "Begin End InHeader InPayload InTrailer OutHeader OutPayload"}
		want = []string{sortedWords(want[0]), sortedWords(want[1])}
		var got []string
		for a := range strings.SplitSeq(strings.Join(h.events, " "), " End") {
			if a = strings.TrimSpace(a); a != "" {
				got = append(got, sortedWords(a+" End"))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("stats events per attempt = %q; want %q", got, want)
		}
		h.events = got
		// grpc-go adds grpc-previous-rpc-attempts beneath the stats handler, so the
		// server is asked what each attempt carried.
		_, prev := srv.seen()
		return fmt.Sprintf("events=%v transparent=%d prev=%q", h.events, h.transparent, prev)
	})
}

// statsRecorder records a channel's RPC events by type.
type statsRecorder struct {
	mu          sync.Mutex
	events      []string
	transparent int // Begin events of transparent retries
}

func (*statsRecorder) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (*statsRecorder) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (*statsRecorder) HandleConn(context.Context, stats.ConnStats) {}

func (h *statsRecorder) HandleRPC(_ context.Context, s stats.RPCStats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var name string
	switch s := s.(type) {
	case *stats.Begin:
		name = "Begin"
		if s.IsTransparentRetryAttempt {
			h.transparent++
		}
	case *stats.OutHeader:
		name = "OutHeader"
	case *stats.OutPayload:
		name = "OutPayload"
	case *stats.InHeader:
		name = "InHeader"
	case *stats.InPayload:
		name = "InPayload"
	case *stats.InTrailer:
		name = "InTrailer"
	case *stats.End:
		name = "End"
	default:
		return // DelayedPickComplete and the like come and go with timing
	}
	h.events = append(h.events, name)
}

// count returns how many events named name the handler saw.
func (h *statsRecorder) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e == name {
			n++
		}
	}
	return n
}

// sortedWords returns s's words sorted, joined by spaces.
func sortedWords(s string) string {
	w := strings.Fields(s)
	slices.Sort(w)
	return strings.Join(w, " ")
}

// TestConformance_ParseServiceConfig: what grpc-go accepts as a channel's default
// service config (grpc.NewClient with grpc.WithDefaultServiceConfig, which parses it
// at once) Backstop's ParseServiceConfig accepts, and what one refuses the other
// refuses.
func TestConformance_ParseServiceConfig(t *testing.T) {
	const ok = `"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]`
	rp := func(body string) string {
		return `{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {` + body + `}}]}`
	}
	const mc = `{"methodConfig": [{"name": [{"service": "s"}]}]` // grpc-go checks retryThrottling only beside one
	for _, tt := range []struct{ name, json string }{
		{"the suite's config", retryConfig(4, `"UNAVAILABLE"`, "")},
		{"methodConfig without name", `{"methodConfig": [{"retryPolicy": {"maxAttempts": 1}}]}`},
		{"methodConfig with an empty name list", `{"methodConfig": [{"name": [], "retryPolicy": {"maxAttempts": 1}}]}`},
		{"unknown field in methodConfig", `{"methodConfig": [{"name": [{"service": "s"}], "surprise": 1}]}`},
		{"unknown field in retryPolicy", rp(ok + `, "surprise": 1`)},
		{"unknown field in retryThrottling", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1, "surprise": 1}}`},
		{"retryThrottling field names in capitals", `{"retryThrottling": {"MaxTokens": 10, "TokenRatio": 0.1}}`},
		{"retryThrottling without tokenRatio", mc + `, "retryThrottling": {"maxTokens": 10}}`},
		{"retryThrottling maxTokens 1000", mc + `, "retryThrottling": {"maxTokens": 1000, "tokenRatio": 0.1}}`},
		{"retryThrottling maxTokens 1001", mc + `, "retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}`},
		{"retryThrottling tokenRatio 0", mc + `, "retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}`},
		{"retryThrottling maxTokens 1001 without methodConfig", `{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}`},
		{"hedgingPolicy without nonFatalStatusCodes", `{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2}}]}`},
		{"hedgingPolicy without maxAttempts", `{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {}}]}`},
		{"retryPolicy and hedgingPolicy together", `{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {` + ok + `}, "hedgingPolicy": {"maxAttempts": 2}}]}`},
		{"maxAttempts 1", rp(strings.Replace(ok, `"maxAttempts": 2`, `"maxAttempts": 1`, 1))},
		{"maxAttempts 100", rp(strings.Replace(ok, `"maxAttempts": 2`, `"maxAttempts": 100`, 1))},
		{"status code by number", rp(strings.Replace(ok, `["UNAVAILABLE"]`, `[14]`, 1))},
		{"status code in lower case", rp(strings.Replace(ok, `["UNAVAILABLE"]`, `["unavailable"]`, 1))},
		{"no retryable status code", rp(strings.Replace(ok, `["UNAVAILABLE"]`, `[]`, 1))},
		{"backoffMultiplier 0", rp(strings.Replace(ok, `"backoffMultiplier": 2`, `"backoffMultiplier": 0`, 1))},
		{"initialBackoff 0s", rp(strings.Replace(ok, `"0.1s"`, `"0s"`, 1))},
		{"initialBackoff without seconds", rp(strings.Replace(ok, `"0.1s"`, `".1s"`, 1))},
		{"initialBackoff in milliseconds", rp(strings.Replace(ok, `"0.1s"`, `"100ms"`, 1))},
		{"the same name twice", `{"methodConfig": [{"name": [{"service": "s"}]}, {"name": [{"service": "s"}]}]}`},
		{"a method without service", `{"methodConfig": [{"name": [{"method": "m"}]}]}`},
		{"timeout", `{"methodConfig": [{"name": [{"service": "s"}], "timeout": "1.5s"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			verdict := func(err error) string {
				if err != nil {
					return "refused"
				}
				return "accepted"
			}
			cc, gerr := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultServiceConfig(tt.json))
			if cc != nil {
				require.NoError(t, cc.Close())
			}
			_, berr := policygrpc.ParseServiceConfig([]byte(tt.json))
			t.Logf("grpc-go: %v; backstop: %v", gerr, berr)
			agree(t, "parse/"+tt.name, verdict(gerr), verdict(berr))
		})
	}
}

// TestConformance_Waits compares the waits before each retry at a pinned random draw.
// grpc-go draws from math/rand/v2's global source, which no test can pin: its side is
// its formula (stream.go, shouldRetry, v1.83.2) at the draw. Backstop's side is
// measured: its config runs on the loopback server with a fake clock that records
// every sleep, and a Rand that returns the draw.
func TestConformance_Waits(t *testing.T) {
	const none = -1 // no pushback
	const ms = time.Millisecond
	srv := &script{}
	addr := listen(t, srv)
	for _, tt := range []struct {
		name             string
		initial, max     time.Duration
		multiplier, draw float64
		pushbacks        []int // per failed attempt, its pushback in ms, or none
	}{
		{"grpc-go's test backoff, middle draw", 10 * ms, 10 * ms, 1, 0.5, []int{none, none, none}},
		{"a low draw", 10 * ms, 10 * ms, 1, 0, []int{none, none, none}},
		{"growing backoff", 10 * ms, 100 * ms, 2, 0.5, []int{none, none, none}},
		{"growing to maxBackoff", 10 * ms, 30 * ms, 2, 0.25, []int{none, none, none, none}},
		{"pushback restarts the backoff", 10 * ms, 100 * ms, 2, 0.5, []int{none, 5, none, none}},
		{"a high draw at maxBackoff", 10 * ms, 10 * ms, 1, 0.75, []int{none, none}},
		{"maxBackoff below initialBackoff, shrinking", 40 * ms, 10 * ms, 0.5, 0.5, []int{none, none, none}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			initial, maxBackoff := tt.initial, tt.max
			// grpc-go's waits, by its formula.
			var want []time.Duration
			since := 0.0 // retries since the last pushback
			for _, p := range tt.pushbacks {
				if p != none {
					want = append(want, time.Duration(p)*time.Millisecond)
					since = 0
					continue
				}
				cur := min(float64(initial)*math.Pow(tt.multiplier, since), float64(maxBackoff))
				cur *= 0.8 + 0.4*tt.draw
				want = append(want, time.Duration(int64(cur)))
				since++
			}
			// Backstop's, measured.
			sc := fmt.Sprintf(`{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": 5, "initialBackoff": "%gs", "maxBackoff": "%gs", "backoffMultiplier": %v,
  "retryableStatusCodes": ["UNAVAILABLE"]}}]}`, initial.Seconds(), maxBackoff.Seconds(), tt.multiplier)
			clock := policytest.NewClock(time.Now()).AutoAdvance(true)
			cfg, err := policygrpc.ParseServiceConfigWith([]byte(sc), policygrpc.ParseOptions{Clock: clock, Rand: policytest.NewRand(tt.draw)})
			require.NoError(t, err)
			srv.reset(func(ctx context.Context, n int) error {
				if n >= len(tt.pushbacks) {
					return nil
				}
				if p := tt.pushbacks[n]; p != none {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, strconv.Itoa(p)))
				}
				return status.Error(codes.Unavailable, "down")
			}, nil)
			_, err = dial(t, addr, cfg.DialOptions()...).EmptyCall(t.Context(), &testgrpc.Empty{})
			require.NoError(t, err)
			got := clock.Waits()
			agree(t, "waits/"+tt.name, fmt.Sprint(want), fmt.Sprint(got))
		})
	}
}

// blocking is the server of TestConformance_RetryWhileBlocked: the first stream marked
// "first" fails with ALREADY_EXISTS (retryable there); every other stream waits for its
// client to go away.
type blocking struct {
	testgrpc.UnimplementedTestServiceServer
	mu      sync.Mutex
	failed  bool
	waiting int // streams waiting for their client
}

func (s *blocking) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	first := len(metadata.ValueFromIncomingContext(stream.Context(), "first")) > 0
	s.mu.Lock()
	if first && !s.failed {
		s.failed = true
		s.mu.Unlock()
		return status.Error(codes.AlreadyExists, "the first attempt fails")
	}
	s.waiting++
	s.mu.Unlock()
	<-stream.Context().Done()
	return stream.Context().Err()
}

func (s *blocking) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// TestConformance_RetryWhileBlocked is grpc-go's TestRetryTransparentWhenCommitted:
// on a server that serves one stream at a time, a stream's retry waits for the slot
// another stream holds; the caller cancels it, and every operation on it afterwards
// answers without a panic, in the same way for both owners.
func TestConformance_RetryWhileBlocked(t *testing.T) {
	sc := `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": 2, "initialBackoff": ".01s", "maxBackoff": ".01s", "backoffMultiplier": 1.0,
  "retryableStatusCodes": ["ALREADY_EXISTS"]}}]}`
	compare(t, "retry while blocked", func(t *testing.T, o owner) string {
		srv := &blocking{}
		h := &statsRecorder{}
		ch := o.dial(t, listen(t, srv, grpc.MaxConcurrentStreams(1)), sc, 0, grpc.WithStatsHandler(h))
		ctx1, cancel1 := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "first", "1"))
		defer cancel1()
		stream1, err := ch.FullDuplexCall(ctx1)
		require.NoError(t, err)
		ctx2, cancel2 := context.WithCancel(t.Context())
		defer cancel2()
		_, err = ch.FullDuplexCall(ctx2) // holds the server's one slot
		require.NoError(t, err)
		waitFor(t, func() bool { return srv.waiters() == 1 })
		recv := make(chan error, 1)
		go func() {
			_, err := stream1.Recv() // sees ALREADY_EXISTS and retries, waiting for the slot
			recv <- err
		}()
		// The retry has begun once the stats handler saw a third attempt start.
		waitFor(t, func() bool { return h.count("Begin") == 3 })
		cancel1()
		first := <-recv
		closeErr := stream1.CloseSend()
		_, again := stream1.Recv()
		sendErr := stream1.Send(&testgrpc.StreamingOutputCallRequest{})
		return fmt.Sprintf("Recv: %v; CloseSend: %v; Recv: %v; Send: %v",
			status.Code(first), closeErr, status.Code(again), sendErr)
	})
}

// TestConformance_NoRetryPolicy is grpc-go's TestNoRetry for a channel whose config
// has no retryPolicy: a stream and a unary call that fail with UNAVAILABLE are made
// once each.
func TestConformance_NoRetryPolicy(t *testing.T) {
	srv := &script{}
	addr := listen(t, srv)
	compare(t, "no retry policy", func(t *testing.T, o owner) string {
		down := status.Error(codes.Unavailable, "down")
		srv.reset(func(context.Context, int) error { return down },
			func(testgrpc.TestService_FullDuplexCallServer, int) error { return down })
		ch := o.dial(t, addr, `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}], "timeout": "10s"}]}`, 0)
		stream, err := ch.FullDuplexCall(t.Context())
		require.NoError(t, err)
		_, serr := stream.Recv()
		_, uerr := ch.EmptyCall(t.Context(), &testgrpc.Empty{})
		calls, prev := srv.seen()
		return fmt.Sprintf("stream %v, unary %v, attempts %d prev=%q", status.Code(serr), status.Code(uerr), calls, prev)
	})
}
