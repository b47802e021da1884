package grpcmetrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-go/backstop/clock"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policygrpc"
	"github.com/backstop-go/backstop/policyotel"
	"github.com/backstop-go/backstop/policyotel/grpcmetrics"
	"github.com/backstop-go/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// server answers the n-th request it receives (1-based) with answer(ctx, n).
type server struct {
	testgrpc.UnimplementedTestServiceServer
	n      atomic.Int32
	answer func(ctx context.Context, n int) error
}

func (s *server) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	if err := s.answer(ctx, int(s.n.Add(1))); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

func (s *server) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	if err := s.answer(stream.Context(), int(s.n.Add(1))); err != nil {
		return err
	}
	return stream.Send(&testgrpc.StreamingOutputCallResponse{})
}

func (s *server) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	if err := s.answer(stream.Context(), int(s.n.Add(1))); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
			}
			return err
		}
	}
}

// failing answers its first n requests UNAVAILABLE.
func failing(n int) func(context.Context, int) error {
	return func(_ context.Context, i int) error {
		if i <= n {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}
}

// rig is a server on a free loopback port and a client channel to it whose calls p
// runs, marked for the Observer's gRPC metrics.
type rig struct {
	conn   *grpc.ClientConn
	client testgrpc.TestServiceClient
	reader *sdkmetric.ManualReader
	attrs  attribute.Set // grpc.method EmptyCall, grpc.target the channel's
}

func newRig(t *testing.T, answer func(context.Context, int) error, clock clock.Clock, stages ...policy.Policy) *rig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(g, &server{answer: answer})
	go g.Serve(ln) //nolint:errcheck // ends with Stop
	t.Cleanup(g.Stop)
	return dial(t, ln.Addr().String(), clock, stages...)
}

// dial returns a rig of a client channel to addr whose calls the pipeline of stages
// runs, observed by a policyotel Observer, with grpcmetrics' dial options on clock.
func dial(t *testing.T, addr string, clock clock.Clock, stages ...policy.Policy) *rig {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := policyotel.New(mp)
	require.NoError(t, err)
	p := policy.Must(policy.Wrap(stages...)).With(policy.Observe(obs))
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		grpcmetrics.DialOptions(obs, grpcmetrics.Options{Clock: clock})...)
	conn, err := grpc.NewClient(addr, append(opts, policygrpc.DialOptions(p, policygrpc.Options{})...)...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &rig{conn: conn, client: testgrpc.NewTestServiceClient(conn), reader: reader,
		attrs: attribute.NewSet(attribute.String("grpc.method", "grpc.testing.TestService/EmptyCall"),
			attribute.String("grpc.target", "dns:///"+addr))}
}

// point returns the data point of the histogram name with attrs, or false if there is
// none, and checks the instrument's unit.
func point[N int64 | float64](t *testing.T, r *sdkmetric.ManualReader, name, unit string, attrs attribute.Set) (metricdata.HistogramDataPoint[N], bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			require.Equal(t, unit, m.Unit, "%s's unit", name)
			for _, dp := range m.Data.(metricdata.Histogram[N]).DataPoints {
				if dp.Attributes.Equals(&attrs) {
					return dp, true
				}
			}
		}
	}
	return metricdata.HistogramDataPoint[N]{}, false
}

// retrying is a retry of 3 attempts on clock, its backoff Full jitter at 0.5.
func retrying(clock clock.Clock) policy.Policy {
	return policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: policytest.NewRand(0.5)}))
}

// TestDialOptions_Retries: a unary call records its retries (none, as A96 asks, for a
// call that made one attempt) and the delay between its attempts, with its method and
// target.
func TestDialOptions_Retries(t *testing.T) {
	for _, tt := range []struct {
		failures  int
		wantDelay time.Duration
	}{
		{0, 0},
		{1, 50 * time.Millisecond}, // Full jitter at 0.5 of Base: 0.5 × 100ms
		{2, 50*time.Millisecond + 100*time.Millisecond}, // then 0.5 × 200ms
	} {
		clock := policytest.NewClock(t0).AutoAdvance(true)
		r := newRig(t, failing(tt.failures), clock, retrying(clock))
		_, err := r.client.EmptyCall(context.Background(), &testgrpc.Empty{})
		require.NoError(t, err, "EmptyCall after %d failures", tt.failures)

		retries, ok := point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", r.attrs)
		if tt.failures == 0 {
			require.False(t, ok, "a call with no retry recorded %s %v; A96 reports no 0", policyotel.MetricGRPCRetries, retries)
		} else {
			require.True(t, ok, "%d failures: no %s point", tt.failures, policyotel.MetricGRPCRetries)
			require.Equal(t, uint64(1), retries.Count, "%d failures: calls recorded", tt.failures)
			require.Equal(t, int64(tt.failures), retries.Sum, "%d failures: retries", tt.failures)
			require.Equal(t, []float64{1, 2, 3, 4, 5}, retries.Bounds, "%s buckets", policyotel.MetricGRPCRetries)
		}
		_, ok = point[int64](t, r.reader, policyotel.MetricGRPCHedges, "{hedge}", r.attrs)
		require.False(t, ok, "%d failures: a retried call recorded hedges", tt.failures)
		_, ok = point[int64](t, r.reader, policyotel.MetricGRPCTransparentRetries, "{transparent_retry}", r.attrs)
		require.False(t, ok, "%d failures: a call with no transparent retry recorded one", tt.failures)

		delay, ok := point[float64](t, r.reader, policyotel.MetricGRPCRetryDelay, "s", r.attrs)
		require.True(t, ok, "%d failures: no %s point", tt.failures, policyotel.MetricGRPCRetryDelay)
		require.Equal(t, uint64(1), delay.Count, "%d failures: calls recorded", tt.failures)
		require.InDelta(t, tt.wantDelay.Seconds(), delay.Sum, 1e-9, "%d failures: retry delay", tt.failures)
		require.Len(t, delay.Bounds, 41, "%s: A66's latency buckets", policyotel.MetricGRPCRetryDelay)
	}
}

// TestDialOptions_Hedged: a hedged call records its hedge, no retry, and no delay:
// an attempt was in flight all along.
func TestDialOptions_Hedged(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true) // the hedge's timer fires at once
	// The first request to arrive waits until it is cancelled; the second answers.
	r := newRig(t, func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		return nil
	}, clock, policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 2, Delay: 50 * time.Millisecond, Clock: clock})))
	_, err := r.client.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err, "hedged EmptyCall")

	hedges, ok := point[int64](t, r.reader, policyotel.MetricGRPCHedges, "{hedge}", r.attrs)
	require.True(t, ok, "no %s point", policyotel.MetricGRPCHedges)
	require.Equal(t, uint64(1), hedges.Count, "calls recorded")
	require.Equal(t, int64(1), hedges.Sum, "hedges")
	require.Equal(t, []float64{1, 2, 3, 4, 5}, hedges.Bounds, "%s buckets", policyotel.MetricGRPCHedges)
	_, ok = point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", r.attrs)
	require.False(t, ok, "a hedged call recorded retries")
	delay, ok := point[float64](t, r.reader, policyotel.MetricGRPCRetryDelay, "s", r.attrs)
	require.True(t, ok, "no %s point", policyotel.MetricGRPCRetryDelay)
	require.Equal(t, 0.0, delay.Sum, "retry delay of a hedged call")
}

// TestDialOptions_MethodNotGenerated: a call made without grpc.StaticMethod (not
// through generated code) is recorded under grpc.method "other", as A66 bounds it.
func TestDialOptions_MethodNotGenerated(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	r := newRig(t, failing(1), clock, retrying(clock))
	require.NoError(t, r.conn.Invoke(context.Background(), "/grpc.testing.TestService/EmptyCall", &testgrpc.Empty{}, &testgrpc.Empty{}))
	other := attribute.NewSet(attribute.String("grpc.method", "other"), r.attrs.ToSlice()[1])
	retries, ok := point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", other)
	require.True(t, ok, "no %s point with grpc.method other", policyotel.MetricGRPCRetries)
	require.Equal(t, int64(1), retries.Sum, "retries")
}

// TestDialOptions_Stream: a server stream whose first attempt failed before any
// header is retried, and records its retry when the stream ends.
func TestDialOptions_Stream(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	r := newRig(t, failing(1), clock, retrying(clock))
	stream, err := r.client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	require.NoError(t, err)
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	require.True(t, errors.Is(err, io.EOF), "stream ended with %v, want io.EOF", err)
	attrs := attribute.NewSet(attribute.String("grpc.method", "grpc.testing.TestService/StreamingOutputCall"), r.attrs.ToSlice()[1])
	retries, ok := point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", attrs)
	require.True(t, ok, "no %s point for the stream", policyotel.MetricGRPCRetries)
	require.Equal(t, uint64(1), retries.Count, "streams recorded")
	require.Equal(t, int64(1), retries.Sum, "retries")
	delay, ok := point[float64](t, r.reader, policyotel.MetricGRPCRetryDelay, "s", attrs)
	require.True(t, ok, "no %s point for the stream", policyotel.MetricGRPCRetryDelay)
	require.InDelta(t, 0.05, delay.Sum, 1e-9, "retry delay: 0.5 × 100ms")
}

// TestDialOptions_ClientStream: a client stream ends with its response, which the
// caller reads once (CloseAndRecv), without an io.EOF: the call is recorded then.
func TestDialOptions_ClientStream(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	r := newRig(t, failing(0), clock, retrying(clock))
	stream, err := r.client.StreamingInputCall(context.Background())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&testgrpc.StreamingInputCallRequest{}))
	_, err = stream.CloseAndRecv()
	require.NoError(t, err, "CloseAndRecv")
	attrs := attribute.NewSet(attribute.String("grpc.method", "grpc.testing.TestService/StreamingInputCall"), r.attrs.ToSlice()[1])
	delay, ok := point[float64](t, r.reader, policyotel.MetricGRPCRetryDelay, "s", attrs)
	require.True(t, ok, "no %s point for the client stream", policyotel.MetricGRPCRetryDelay)
	require.Equal(t, uint64(1), delay.Count, "streams recorded")
	_, ok = point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", attrs)
	require.False(t, ok, "a stream with no retry recorded retries")
}
