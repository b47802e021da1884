// Command grpc runs a two-service gRPC chain on 127.0.0.1 — client → front → backend —
// and shows Backstop's retry owner at work across gRPC hops, beside grpc-go's own
// retry configured the same way: with the backend down, one user call costs the
// backend 4 requests with Backstop (the client owns retries, front fails fast) and
// 4 × 4 = 16 with grpc-go's retry on both hops. Then the backend pushes back (gRFC A6)
// and the client waits exactly as long as it was told.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/retry"
)

// The same retry policy for both stacks: 4 attempts from 10 ms, doubling to 100 ms.
const serviceConfig = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
	"retryableStatusCodes": ["UNAVAILABLE"]}}]}`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grpc:", err)
		os.Exit(1)
	}
}

// backend answers what answer says and counts its calls.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	calls  atomic.Int64
	answer func(ctx context.Context, n int64) error
}

func (b *backend) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	if err := b.answer(ctx, b.calls.Add(1)); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

// front calls the backend once per call it gets, through its own client.
type front struct {
	testgrpc.UnimplementedTestServiceServer
	backend testgrpc.TestServiceClient
}

func (f *front) EmptyCall(ctx context.Context, in *testgrpc.Empty) (*testgrpc.Empty, error) {
	return f.backend.EmptyCall(ctx, in)
}

// serve starts srv on a free loopback port; stop ends it.
func serve(srv testgrpc.TestServiceServer, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	g := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(g, srv)
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	return ln.Addr().String(), g.Stop, nil
}

func client(addr string, opts ...grpc.DialOption) (testgrpc.TestServiceClient, func(), error) {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return testgrpc.NewTestServiceClient(conn), func() { conn.Close() }, nil
}

// chain runs client → front → backend with the backend down and returns the backend's
// requests for one user call. backstop chooses Backstop's pipelines on both hops (and
// its server interceptor on front) or grpc-go's retry on both.
func chain(backstop bool) (int64, error) {
	be := &backend{answer: func(context.Context, int64) error { return status.Error(codes.Unavailable, "down") }}
	beAddr, stopBE, err := serve(be)
	if err != nil {
		return 0, err
	}
	defer stopBE()
	dialOpts := func() []grpc.DialOption {
		if backstop {
			p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond,
				Strategy: retry.GRPC{Multiplier: 2}}))))
			return policygrpc.DialOptions(p, policygrpc.Options{})
		}
		return []grpc.DialOption{grpc.WithDefaultServiceConfig(serviceConfig)}
	}
	toBackend, closeBE, err := client(beAddr, dialOpts()...)
	if err != nil {
		return 0, err
	}
	defer closeBE()
	var serverOpts []grpc.ServerOption
	if backstop {
		serverOpts = append(serverOpts, grpc.ChainUnaryInterceptor(policygrpc.UnaryServerInterceptor()))
	}
	feAddr, stopFE, err := serve(&front{backend: toBackend}, serverOpts...)
	if err != nil {
		return 0, err
	}
	defer stopFE()
	toFront, closeFE, err := client(feAddr, dialOpts()...)
	if err != nil {
		return 0, err
	}
	defer closeFE()
	_, err = toFront.EmptyCall(context.Background(), &testgrpc.Empty{})
	if status.Code(err) != codes.Unavailable {
		return 0, fmt.Errorf("the chain answered %v; want UNAVAILABLE", err)
	}
	return be.calls.Load(), nil
}

// pushback has the backend refuse the first call with a 300 ms pushback and returns
// how long the client waited before its retry.
func pushback() (time.Duration, error) {
	var first, second atomic.Int64
	be := &backend{answer: func(ctx context.Context, n int64) error {
		now := time.Now().UnixNano()
		if n == 1 {
			first.Store(now)
			_ = grpc.SetTrailer(ctx, metadata.Pairs(policygrpc.MetadataPushback, "300"))
			return status.Error(codes.Unavailable, "busy: come back in 300 ms")
		}
		second.Store(now)
		return nil
	}}
	addr, stop, err := serve(be)
	if err != nil {
		return 0, err
	}
	defer stop()
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 2}))))
	c, closeC, err := client(addr, policygrpc.DialOptions(p, policygrpc.Options{})...)
	if err != nil {
		return 0, err
	}
	defer closeC()
	if _, err := c.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
		return 0, err
	}
	return time.Duration(second.Load() - first.Load()), nil
}

func run() error {
	fmt.Println("grpc: client → front → backend on 127.0.0.1, the backend down, one user call, 4 attempts per hop")
	naive, err := chain(false)
	if err != nil {
		return err
	}
	owned, err := chain(true)
	if err != nil {
		return err
	}
	fmt.Printf("  grpc-go's retry on both hops: %2d backend requests (4 × 4)\n", naive)
	fmt.Printf("  Backstop on both hops:        %2d backend requests (one retry owner)\n", owned)
	waited, err := pushback()
	if err != nil {
		return err
	}
	fmt.Printf("grpc: the backend pushed back 300 ms; the client came back after %v\n", waited.Round(10*time.Millisecond))
	if naive != 16 || owned != 4 {
		return fmt.Errorf("backend requests %d and %d; want 16 and 4", naive, owned)
	}
	fmt.Println("grpc: ok")
	return nil
}
