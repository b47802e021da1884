package policygrpc_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/breaker"
	"github.com/backstop-go/backstop/budget"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// server is a real gRPC TestService on 127.0.0.1 whose EmptyCall answers with
// answer(n) for the n-th call, and records every call's incoming metadata.
type server struct {
	testgrpc.UnimplementedTestServiceServer
	addr   string
	answer func(ctx context.Context, n int) error
	mu     sync.Mutex
	mds    []metadata.MD
}

func (s *server) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.mds = append(s.mds, md)
	n := len(s.mds)
	s.mu.Unlock()
	if err := s.answer(ctx, n); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

func (s *server) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if _, err := s.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (s *server) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mds)
}

// values returns key's first value in every call's metadata ("" where absent).
func (s *server) values(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vs []string
	for _, md := range s.mds {
		v := ""
		if got := md.Get(key); len(got) > 0 {
			v = got[0]
		}
		vs = append(vs, v)
	}
	return vs
}

// serve starts s on a free loopback port with the server options given; it stops
// when the test ends.
func serve(t *testing.T, s *server, opts ...grpc.ServerOption) *server {
	t.Helper()
	s.addr = listen(t, s, opts...)
	return s
}

// listen serves impl on a free loopback port with the server options given, until the
// test ends, and returns its address.
func listen(t *testing.T, impl testgrpc.TestServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(g, impl)
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// always answers every call with err.
func always(err error) func(context.Context, int) error {
	return func(context.Context, int) error { return err }
}

// dial returns a TestService client of addr with the dial options given.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// retrying returns a pipeline of a retry of n attempts on an auto-advancing fake clock,
// with the other policies given outside it.
func retrying(n int, clock *policytest.Clock, outer ...policy.Policy) *policy.Pipeline {
	return policy.Must(policy.Wrap(append(outer, policy.Must(retry.New(retry.Options{MaxAttempts: n, Clock: clock, Rand: policytest.NewRand(0.5)})))...))
}

func TestUnary_RetriesUnavailableOnly(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	flaky := serve(t, &server{answer: func(_ context.Context, n int) error {
		if n < 3 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}})
	c := dial(t, flaky.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	require.Equal(t, 3, flaky.calls(), "two UNAVAILABLE, then success")
	require.Equal(t, []string{"1", "2", "3"}, flaky.values(policygrpc.MetadataAttempt))
	require.Equal(t, []string{"", "1", "2"}, flaky.values(policygrpc.MetadataPreviousAttempts), "A6's count of earlier attempts")

	bad := serve(t, &server{answer: always(status.Error(codes.InvalidArgument, "no"))})
	c = dial(t, bad.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)
	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "the server's status reaches the caller: %v", err)
	require.Equal(t, 1, bad.calls(), "INVALID_ARGUMENT is not retried")

	// The retryable set is configurable.
	busy := serve(t, &server{answer: always(status.Error(codes.Aborted, "conflict"))})
	c = dial(t, busy.addr, policygrpc.DialOptions(retrying(3, clock), policygrpc.Options{RetryableCodes: []codes.Code{codes.Aborted}})...)
	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Aborted, status.Code(err))
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, 3, busy.calls())
}

// TestUnary_Pushback checks every case of gRFC A6's grpc-retry-pushback-ms.
func TestUnary_Pushback(t *testing.T) {
	for _, tt := range []struct {
		name     string
		value    string
		calls    int
		waits    []time.Duration
		tokens   float64 // of a 10/0.1 bucket after the call
		retrying bool
	}{
		{"exact delay, no jitter", "1500", 2, []time.Duration{1500 * time.Millisecond}, 9, true}, // tokens 9 = 10 − 1 failure (+0.1 for the success below)
		{"zero: retry at once", "0", 2, nil, 9, true},
		{"negative: do not retry", "-1", 1, nil, 9, false}, // the refusal still costs a token
		{"malformed: do not retry", "soon", 1, nil, 9, false},
		{"a fraction is malformed", "1.5", 1, nil, 9, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := policytest.NewClock(t0).AutoAdvance(true)
			s := serve(t, &server{answer: func(ctx context.Context, n int) error {
				if n == 1 {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, tt.value))
				}
				if n < 2 {
					return status.Error(codes.Unavailable, "overloaded")
				}
				return nil
			}})
			bucket := policy.Must(budget.NewTokenBucket(budget.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1}))
			c := dial(t, s.addr, policygrpc.DialOptions(retrying(2, clock, bucket), policygrpc.Options{})...)
			_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
			require.Equal(t, tt.calls, s.calls())
			require.Equal(t, tt.waits, clock.Waits())
			if tt.retrying {
				require.NoError(t, err)
				tt.tokens += 0.1 // the success refunds
			} else {
				require.Equal(t, codes.Unavailable, status.Code(err))
				require.ErrorIs(t, err, retry.ErrNotRetryable)
			}
			require.InDelta(t, tt.tokens, bucket.Tokens(), 1e-9)
		})
	}
}

func TestUnary_CallerCancellationAndDeadline(t *testing.T) {
	clock := policytest.NewClock(t0)
	ctx, cancel := context.WithCancel(context.Background())
	s := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	c := dial(t, s.addr, policygrpc.DialOptions(policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Clock: clock})))), policygrpc.Options{})...)
	done := make(chan error)
	go func() { _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); done <- err }()
	clock.BlockUntil(1) // sleeping before attempt 2
	cancel()
	err := <-done
	require.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, s.calls(), "nothing retried once the caller cancelled")

	// A caller's deadline that passes while the server works: DEADLINE_EXCEEDED, once.
	slow := serve(t, &server{answer: func(ctx context.Context, _ int) error { <-ctx.Done(); return ctx.Err() }})
	c = dial(t, slow.addr, policygrpc.DialOptions(retrying(4, policytest.NewClock(t0).AutoAdvance(true)), policygrpc.Options{
		RetryableCodes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded}})...)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	_, err = c.EmptyCall(dctx, &testgrpc.Empty{})
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Equal(t, 1, slow.calls(), "the caller's DEADLINE_EXCEEDED is never retried, even if listed")
}

func TestUnary_OpenBreakerIsUnavailableWithNoCall(t *testing.T) {
	s := serve(t, &server{answer: always(nil)})
	b := policy.Must(breaker.New(breaker.Options{Name: "svc"}))
	b.ForceOpen()
	c := dial(t, s.addr, policygrpc.DialOptions(policy.Must(policy.Wrap(b, policy.Must(retry.New(retry.Options{})))), policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorIs(t, err, breaker.ErrOpen)
	require.Zero(t, s.calls())
}

// TestUnary_PerAttemptTimeoutIsRetried: a DEADLINE_EXCEEDED that the per-attempt
// timeout caused is the deadline stage's timeout, and the retry above retries it.
func TestUnary_PerAttemptTimeoutIsRetried(t *testing.T) {
	s := serve(t, &server{answer: func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done() // hang until the attempt's own deadline passes
			return ctx.Err()
		}
		return nil
	}})
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2, Base: time.Millisecond})), deadlineFor(t, 50*time.Millisecond)))
	c := dial(t, s.addr, policygrpc.DialOptions(p, policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err)
	require.Equal(t, 2, s.calls())
}

// TestDialOptions_OneOwnerPerChannel: a service config that turns on grpc-go's own
// retry does not add a second owner on a channel dialled with DialOptions.
func TestDialOptions_OneOwnerPerChannel(t *testing.T) {
	s := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	const cfg = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	clock := policytest.NewClock(t0).AutoAdvance(true)
	c := dial(t, s.addr, append(policygrpc.DialOptions(retrying(2, clock), policygrpc.Options{}), grpc.WithDefaultServiceConfig(cfg))...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Error(t, err)
	require.Equal(t, 2, s.calls(), "Backstop's 2 attempts, not 2 × grpc-go's 4")

	// Without it, grpc-go's own retry owns the channel: 4 attempts, as configured.
	s2 := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	c = dial(t, s2.addr, grpc.WithDefaultServiceConfig(cfg))
	_, _ = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, 4, s2.calls())
	require.Equal(t, []string{"", "1", "2", "3"}, s2.values(policygrpc.MetadataPreviousAttempts))
}

func TestStreamClientInterceptor_CarriesTheOwner(t *testing.T) {
	s2 := &streamServer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(g, s2)
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	defer g.Stop()
	c := dial(t, ln.Addr().String(), grpc.WithChainStreamInterceptor(policygrpc.StreamClientInterceptor()))
	ctx := callpath.WithAttempt(context.Background(), 3)
	stream, err := c.StreamingInputCall(ctx)
	require.NoError(t, err)
	_, err = stream.CloseAndRecv()
	require.NoError(t, err)
	require.Equal(t, "3", s2.attempt)
}

type streamServer struct {
	testgrpc.UnimplementedTestServiceServer
	attempt string
}

func (s *streamServer) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	if v := md.Get(policygrpc.MetadataAttempt); len(v) > 0 {
		s.attempt = v[0]
	}
	return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
}

// TestUnary_CodeNoStatusHas: a server that answers with a code gRPC does not define
// gets it back, unretried, and cannot make the client index past its table of codes.
func TestUnary_CodeNoStatusHas(t *testing.T) {
	s := serve(t, &server{answer: always(status.Error(codes.Code(100), "odd"))})
	c := dial(t, s.addr, policygrpc.DialOptions(retrying(3, policytest.NewClock(t0).AutoAdvance(true)), policygrpc.Options{})...)
	_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Code(100), status.Code(err))
	require.Equal(t, 1, s.calls())
}

// TestUnary_PushbackPastTheDeadlineSaysSo: a pushback longer than the time left ends
// the call at once with DEADLINE_EXCEEDED, and the message says why, whether the
// deadline is a service config's timeout, a pipeline's deadline or the caller's.
func TestUnary_PushbackPastTheDeadlineSaysSo(t *testing.T) {
	const cfg = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}], "timeout": "2s",
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	sc, err := policygrpc.ParseServiceConfig([]byte(cfg))
	require.NoError(t, err)
	pipeline := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 3}))))
	for _, tt := range []struct {
		name string
		dial []grpc.DialOption
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"service config timeout", sc.DialOptions(), func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"pipeline deadline", policygrpc.DialOptions(pipeline, policygrpc.Options{}), func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}},
		{"caller's deadline", policygrpc.DialOptions(policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3})))), policygrpc.Options{}),
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 2*time.Second)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, &server{answer: pushingBack(status.Error(codes.Unavailable, "overloaded"), "5000")})
			c := dial(t, s.addr, tt.dial...)
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
			require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
			require.ErrorIs(t, err, retry.ErrDeadline, "the retry gave up at once")
			require.Equal(t, 1, s.calls())
			msg := status.Convert(err).Message()
			require.Regexp(t, `^policygrpc: server pushback 5s exceeds the (1\.9\d*|2)s left before the deadline; last attempt: Unavailable: overloaded$`, msg)
			require.Equal(t, msg, err.Error())
		})
	}
}
