package bench

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

// --- 6. gRPC: a unary call's success path --------------------------------------------

type emptyServer struct {
	testgrpc.UnimplementedTestServiceServer
}

func (emptyServer) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

// grpcClient serves the TestService on 127.0.0.1 and returns a client dialled with
// opts.
func grpcClient(b *testing.B, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(g, emptyServer{})
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	b.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

func callLoop(b *testing.B, c testgrpc.TestServiceClient) {
	ctx := context.Background()
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil { // connect first
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A retry of 4 attempts from 100 ms doubling to 1 s on UNAVAILABLE: the same policy
// for Backstop and for grpc-go's built-in retry.
const grpcRetryConfig = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

func BenchmarkGRPCUnary_Bare(b *testing.B) {
	callLoop(b, grpcClient(b, grpc.WithDisableRetry()))
}

func BenchmarkGRPCUnary_GrpcGoRetry(b *testing.B) {
	callLoop(b, grpcClient(b, grpc.WithDefaultServiceConfig(grpcRetryConfig)))
}

// BenchmarkGRPCUnary_GrpcGoRetryAttemptHeader is grpc-go's retry with a client
// interceptor that only adds the attempt metadata Backstop sends on every call: the
// cost of carrying the owner across the hop, apart from the rest of the interceptor.
func BenchmarkGRPCUnary_GrpcGoRetryAttemptHeader(b *testing.B) {
	header := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, policygrpc.MetadataAttempt, "1"), method, req, reply, cc, opts...)
	}
	callLoop(b, grpcClient(b, grpc.WithDefaultServiceConfig(grpcRetryConfig), grpc.WithUnaryInterceptor(header)))
}

func BenchmarkGRPCUnary_Backstop(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: 100e6, Cap: 1e9, Strategy: retry.GRPC{Multiplier: 2}}))))
	callLoop(b, grpcClient(b, policygrpc.DialOptions(p, policygrpc.Options{})...))
}

// BenchmarkGRPCInterceptor_Backstop is the interceptor alone, around an invoker that
// succeeds at once: what Backstop adds to a call, without the network.
func BenchmarkGRPCInterceptor_Backstop(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4}))))
	ic := policygrpc.UnaryClientInterceptor(p, policygrpc.Options{})
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := ic(ctx, "/s/m", nil, nil, nil, invoker); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGRPCInterceptorRequest_Backstop is the interceptor alone under a
// cancellable context, as a server handler's outbound calls run: the retry marks each
// attempt's context and the attempt metadata need a context of their own.
func BenchmarkGRPCInterceptorRequest_Backstop(b *testing.B) {
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4}))))
	ic := policygrpc.UnaryClientInterceptor(p, policygrpc.Options{})
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx, cancel := requestCtx()
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if err := ic(ctx, "/s/m", nil, nil, nil, invoker); err != nil {
			b.Fatal(err)
		}
	}
}
