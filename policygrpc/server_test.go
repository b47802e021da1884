package policygrpc_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/callpath"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/shed"
)

// TestChain_OneOwnerAcrossHTTPAndGRPC: edge (HTTP, policyhttp) → svc (gRPC) → db (gRPC,
// always UNAVAILABLE). Every hop has a retry of 4 attempts; the database sees 4
// requests per user call — the edge's — not 4 × 4 × 4.
func TestChain_OneOwnerAcrossHTTPAndGRPC(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	db := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	dbClient := dial(t, db.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)

	// svc: a gRPC server whose handler calls db through its own retrying pipeline.
	var svcOwned atomic.Int64
	svc := serve(t, &server{answer: func(ctx context.Context, _ int) error {
		if callpath.Owned(ctx) {
			svcOwned.Add(1)
		}
		_, err := dbClient.EmptyCall(ctx, &testgrpc.Empty{})
		return err
	}}, grpc.ChainUnaryInterceptor(policygrpc.UnaryServerInterceptor()))
	svcClient := dial(t, svc.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)

	// edge: an HTTP server behind policyhttp.Middleware, calling svc.
	edge := httptest.NewServer(policyhttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := svcClient.EmptyCall(r.Context(), &testgrpc.Empty{}); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})))
	defer edge.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	user := &http.Client{Transport: policyhttp.NewTransport(tr, retrying(4, clock), policyhttp.Options{})}
	res, err := user.Get(edge.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, 4, db.calls(), "database requests for one user call: the owner's 4, not 64")
	require.Equal(t, 4, svc.calls(), "one svc call per edge attempt")
	require.Equal(t, int64(4), svcOwned.Load(), "svc's handler ran owned upstream every time")
	require.Equal(t, []string{"1", "1", "1", "1"}, db.values(policygrpc.MetadataAttempt),
		"svc makes each call once: it carries the ownership on as attempt 1")
}

// TestForeignClient_GrpcGoRetryOwnsTheCallPath: a grpc-go client with its own retry
// (service config retryPolicy, no Backstop) calls a Backstop server; its retries carry
// grpc-previous-rpc-attempts, and the handler's Backstop pipeline to the database fails
// fast on them: one database request per grpc-go attempt.
func TestForeignClient_GrpcGoRetryOwnsTheCallPath(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	db := serve(t, &server{answer: always(status.Error(codes.Unavailable, "down"))})
	dbClient := dial(t, db.addr, policygrpc.DialOptions(retrying(4, clock), policygrpc.Options{})...)
	svc := serve(t, &server{answer: func(ctx context.Context, _ int) error {
		_, err := dbClient.EmptyCall(ctx, &testgrpc.Empty{})
		return err
	}}, grpc.ChainUnaryInterceptor(policygrpc.UnaryServerInterceptor()))

	const cfg = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	foreign := dial(t, svc.addr, grpc.WithDefaultServiceConfig(cfg))
	_, err := foreign.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, 3, svc.calls(), "grpc-go made its 3 attempts")
	require.Equal(t, []string{"", "1", "2"}, svc.values(policygrpc.MetadataPreviousAttempts))
	// The first grpc-go attempt carries no metadata: the handler owns that call and
	// its pipeline makes 4 attempts; on grpc-go's retries it makes one each.
	require.Equal(t, 4+1+1, db.calls(), "database requests: 4 under the first attempt, 1 under each retry")
}

// TestShed_RefusesWithPushbackAndShedsRetriesFirst: with every slot taken, an RPC is
// answered RESOURCE_EXHAUSTED with a pushback trailer and the handler is not called.
func TestShed_RefusesWithPushbackAndShedsRetriesFirst(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 4}, Queue: shed.QueueOptions{Max: -1}}))
	ic, err := policygrpc.ShedUnaryServerInterceptor(s, policygrpc.ShedOptions{})
	require.NoError(t, err)
	srv := serve(t, &server{answer: func(ctx context.Context, _ int) error {
		entered <- struct{}{}
		<-release
		return nil
	}}, grpc.ChainUnaryInterceptor(ic))
	c := dial(t, srv.addr)
	var wg sync.WaitGroup
	for range 3 { // in flight 3 of 4: the sheddable room (3) is full
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.EmptyCall(context.Background(), &testgrpc.Empty{}) }()
		<-entered
	}
	var trailer metadata.MD
	retryCtx := metadata.AppendToOutgoingContext(context.Background(), policygrpc.MetadataPreviousAttempts, "1")
	_, err = c.EmptyCall(retryCtx, &testgrpc.Empty{}, grpc.Trailer(&trailer))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "a retry is shed first: %v", err)
	ms, perr := strconv.Atoi(trailer.Get(policygrpc.MetadataPushback)[0])
	require.NoError(t, perr)
	require.GreaterOrEqual(t, ms, 1000, "the shedder's Retry-After, in ms")
	require.Equal(t, 3, srv.calls(), "the refused RPC never reached the handler")

	wg.Add(1)
	go func() { defer wg.Done(); _, _ = c.EmptyCall(context.Background(), &testgrpc.Empty{}) }()
	<-entered // a first attempt still gets the last slot
	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "the limit is reached")
	close(release)
	wg.Wait()

	_, err = policygrpc.ShedUnaryServerInterceptor(s, policygrpc.ShedOptions{RejectCode: codes.Internal})
	require.ErrorContains(t, err, "RejectCode")
}

// TestShed_EveryRPCServedOrAnswered: a bounded overload of 200 concurrent RPCs on a
// server with 4 slots: every RPC ends served or refused with RESOURCE_EXHAUSTED, and
// the counts add up with the shedder's.
func TestShed_EveryRPCServedOrAnswered(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 4}}))
	ic, err := policygrpc.ShedUnaryServerInterceptor(s, policygrpc.ShedOptions{})
	require.NoError(t, err)
	gate := make(chan struct{}, 4)
	srv := serve(t, &server{answer: func(ctx context.Context, _ int) error {
		gate <- struct{}{}
		defer func() { <-gate }()
		return nil
	}}, grpc.ChainUnaryInterceptor(ic))
	c := dial(t, srv.addr)
	var served, refused, other atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.EmptyCall(context.Background(), &testgrpc.Empty{})
			switch status.Code(err) {
			case codes.OK:
				served.Add(1)
			case codes.ResourceExhausted:
				refused.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, other.Load(), "no RPC lost or failed otherwise")
	require.Equal(t, int64(200), served.Load()+refused.Load())
	st := s.Stats()
	require.Equal(t, uint64(served.Load()), st.Admitted)
	var rejected uint64
	for _, n := range st.Rejected {
		rejected += n
	}
	require.Equal(t, uint64(refused.Load()), rejected)
	require.Equal(t, int(served.Load()), srv.calls(), "the handler ran exactly for the served RPCs")
}

// TestUnaryServerInterceptor_EnvoyAndBackstopMetadata: each attempt header marks the
// handler's context as owned upstream, with the attempt number it says.
func TestUnaryServerInterceptor_EnvoyAndBackstopMetadata(t *testing.T) {
	type seen struct {
		n     int
		owned bool
	}
	var mu sync.Mutex
	var got []seen
	srv := serve(t, &server{answer: func(ctx context.Context, _ int) error {
		n, upstream, ok := callpath.Attempt(ctx)
		mu.Lock()
		got = append(got, seen{n, ok && upstream})
		mu.Unlock()
		return nil
	}}, grpc.ChainUnaryInterceptor(policygrpc.UnaryServerInterceptor()))
	c := dial(t, srv.addr)
	for _, kv := range [][2]string{
		{policygrpc.MetadataAttempt, "2"}, {policygrpc.MetadataEnvoyAttempt, "3"}, {policygrpc.MetadataPreviousAttempts, "3"},
		{policygrpc.MetadataAttempt, "garbage"},
	} {
		_, err := c.EmptyCall(metadata.AppendToOutgoingContext(context.Background(), kv[0], kv[1]), &testgrpc.Empty{})
		require.NoError(t, err)
	}
	require.Equal(t, []seen{{2, true}, {3, true}, {4, true}, {0, false}}, got)
}

// TestShedStream_HoldsItsSlotUntilTheHandlerReturns: with one slot, a second stream
// is refused with RESOURCE_EXHAUSTED and a pushback while the first is open.
// TestShedStream_AStreamWaitingOnItsClientHoldsNoSlot: at a limit of 1, five
// client-streaming calls that have sent one message and gone quiet are all admitted —
// a handler waiting in RecvMsg holds no slot, so slow uploads cannot fill the limit —
// and all complete; while the one slot is taken by work, a new stream is refused with
// the configured code and a pushback.
func TestShedStream_AStreamWaitingOnItsClientHoldsNoSlot(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1}}))
	ic, err := policygrpc.ShedStreamServerInterceptor(s, policygrpc.ShedOptions{RejectCode: codes.Unavailable})
	require.NoError(t, err)
	srv := &streams{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer(grpc.ChainStreamInterceptor(ic))
	testgrpc.RegisterTestServiceServer(g, srv)
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	defer g.Stop()
	c := dial(t, ln.Addr().String())

	received := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		got := 0
		for _, r := range srv.received {
			got += len(r)
		}
		return got
	}
	var quiet []grpc.ClientStreamingClient[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]
	for i := range 5 {
		st, err := c.StreamingInputCall(context.Background())
		require.NoError(t, err)
		require.NoError(t, st.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(1)}))
		quiet = append(quiet, st)
		// The next stream opens once this one's handler has its message and waits on
		// its client again (it then holds no slot).
		waitFor(t, func() bool { return received() == i+1 && s.InFlight() == 0 })
	}
	require.Zero(t, s.InFlight(), "five streams waiting on their clients hold no slot")

	work, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	refused, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, err = refused.CloseAndRecv()
	require.Equal(t, codes.Unavailable, status.Code(err), "the configured reject code, while the slot does work")
	require.NotEmpty(t, refused.Trailer().Get(policygrpc.MetadataPushback))
	work.Release()

	for _, st := range quiet {
		_, err := st.CloseAndRecv()
		require.NoError(t, err)
	}
	require.Equal(t, 5, srv.attempts, "the refused stream never reached the handler")
	require.Zero(t, s.InFlight())
}
