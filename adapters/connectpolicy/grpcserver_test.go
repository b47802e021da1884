package connectpolicy_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backstop-go/backstop/adapters/connectpolicy"
	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/shed"
)

// grpcEcho is the test service served by grpc-go: Say fails with UNAVAILABLE while
// fail says so; every call's ownership is recorded.
type grpcEcho struct {
	fail func(n int) bool

	mu     sync.Mutex // guards owners
	owners []string
}

func (g *grpcEcho) record(ctx context.Context) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := "not owned"
	if n, upstream, ok := callpath.Attempt(ctx); ok {
		o = fmt.Sprintf("attempt %d upstream=%v", n, upstream)
	}
	g.owners = append(g.owners, o)
	return len(g.owners)
}

func (g *grpcEcho) ownership() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.owners...)
}

// serveGRPC serves g with grpc-go on 127.0.0.1 behind opts' interceptors and returns
// its address as a URL.
func serveGRPC(t *testing.T, g *grpcEcho, opts ...grpc.ServerOption) string {
	t.Helper()
	desc := grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Say", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(msg)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				if n := g.record(ctx); g.fail != nil && g.fail(n) {
					return nil, status.Errorf(codes.Unavailable, "call %d fails", n)
				}
				return wrapperspb.String("hello " + req.(*msg).GetValue()), nil
			}
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: sayProcedure}, h)
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "Count", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			in := new(msg)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			g.record(ss.Context())
			for i := 1; i <= 3; i++ {
				if err := ss.SendMsg(wrapperspb.String(fmt.Sprintf("%s %d", in.GetValue(), i))); err != nil {
					return err
				}
			}
			return nil
		}}},
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(&desc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return "http://" + lis.Addr().String()
}

var grpcWire = wire{"h2c grpc", true, connect.WithGRPC()}

// TestGRPCServer_ConnectClientThroughPolicygrpc: a connect client speaking gRPC to a
// grpc-go server whose interceptors are policygrpc's: the server reads the connect
// client's attempts, and the client reads the server's pushback.
func TestGRPCServer_ConnectClientThroughPolicygrpc(t *testing.T) {
	ownership := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(policygrpc.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(policygrpc.StreamServerInterceptor()),
	}
	t.Run("retries reach the handler as the owner's attempts", func(t *testing.T) {
		g := &grpcEcho{fail: func(n int) bool { return n <= 2 }}
		url := serveGRPC(t, g, ownership...)
		sayc, _ := newClient(t, url, grpcWire, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
		require.NoError(t, say(context.Background(), sayc))
		require.Equal(t, []string{"attempt 1 upstream=true", "attempt 2 upstream=true", "attempt 3 upstream=true"}, g.ownership())
	})
	t.Run("under an owner one attempt, and a stream carries the ownership", func(t *testing.T) {
		g := &grpcEcho{fail: func(int) bool { return true }}
		url := serveGRPC(t, g, ownership...)
		sayc, countc := newClient(t, url, grpcWire, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, autoClock()), connectpolicy.Options{}))))
		ctx := callpath.WithUpstreamAttempt(context.Background(), 2)
		require.Equal(t, connect.CodeUnavailable, connect.CodeOf(say(ctx, sayc)))
		stream, err := countc.CallServerStream(ctx, connect.NewRequest(wrapperspb.String("n")))
		require.NoError(t, err)
		n := 0
		for stream.Receive() {
			n++
		}
		require.NoError(t, stream.Err())
		require.NoError(t, stream.Close())
		require.Equal(t, 3, n, "messages")
		require.Equal(t, []string{"attempt 1 upstream=true", "attempt 1 upstream=true"}, g.ownership())
	})
	t.Run("a shedding grpc-go server's pushback is waited exactly", func(t *testing.T) {
		s := policy.Must(shed.New(shed.Options{Name: "grpc", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
		shedding, err := policygrpc.ShedUnaryServerInterceptor(s, policygrpc.ShedOptions{RejectCode: codes.Unavailable})
		require.NoError(t, err)
		g := &grpcEcho{}
		hold, in := make(chan struct{}), make(chan struct{}, 1)
		holding := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("hold")) > 0 {
				in <- struct{}{}
				<-hold
			}
			return h(ctx, req)
		}
		url := serveGRPC(t, g, grpc.ChainUnaryInterceptor(shedding, holding))
		plain, _ := newClient(t, url, grpcWire)
		done := make(chan error, 1)
		go func() {
			req := connect.NewRequest(wrapperspb.String("first"))
			req.Header().Set("hold", "1")
			_, err := plain.CallUnary(context.Background(), req)
			done <- err
		}()
		<-in
		clock := autoClock()
		sayc, _ := newClient(t, url, grpcWire, connect.WithInterceptors(policy.Must(connectpolicy.NewInterceptor(retrying(t, clock), connectpolicy.Options{}))))
		err = say(context.Background(), sayc)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, connect.CodeUnavailable, ce.Code())
		ms := ce.Meta().Get(connectpolicy.HeaderPushback)
		require.NotEmpty(t, ms, "the pushback trailer: meta %v", ce.Meta())
		d, perr := time.ParseDuration(ms + "ms")
		require.NoError(t, perr)
		waits := clock.Waits()
		require.Len(t, waits, 2, "two retries")
		// The shedder's pushback is whole seconds (its jittered Retry-After): a wait
		// with the client's own jitter on it would not be.
		require.GreaterOrEqual(t, d, time.Second, "the pushback")
		for _, w := range waits {
			require.True(t, w >= time.Second && w%time.Second == 0, "each retry waits the shedder's pushback exactly: waited %v", w)
		}
		close(hold)
		require.NoError(t, <-done)
	})
}
