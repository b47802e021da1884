package grpcmetrics_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyotel"
)

// refusing serves gRPC over HTTP/2 on a free loopback port, refusing the first stream
// it sees (RST_STREAM REFUSED_STREAM: the request was not processed) and answering
// every other with an empty message and status OK. gRPC retries a refused first
// attempt transparently, below every interceptor.
func refusing(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		block := func(fields ...string) []byte {
			buf.Reset()
			for i := 0; i < len(fields); i += 2 {
				_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
			}
			return bytes.Clone(buf.Bytes())
		}
		_ = fr.WriteSettings()
		var refused uint32
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.HeadersFrame:
				if refused == 0 {
					refused = f.StreamID
					_ = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
				}
			case *http2.DataFrame:
				if f.StreamEnded() && f.StreamID != refused {
					_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, EndHeaders: true,
						BlockFragment: block(":status", "200", "content-type", "application/grpc")})
					_ = fr.WriteData(f.StreamID, false, []byte{0, 0, 0, 0, 0}) // an empty message
					_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, EndHeaders: true, EndStream: true,
						BlockFragment: block("grpc-status", "0")})
				}
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done // the channel closes its connection first (cleanups run last-in first-out)
	})
	return ln.Addr().String()
}

// TestDialOptions_TransparentRetry: gRPC's transparent retry of a refused stream,
// which no interceptor sees, is counted by the stats handler; the pipeline made one
// attempt, so no retry is recorded.
func TestDialOptions_TransparentRetry(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	r := dial(t, refusing(t), clock, retrying(clock))
	_, err := r.client.EmptyCall(context.Background(), &testgrpc.Empty{})
	require.NoError(t, err, "EmptyCall answered after a refused stream")

	tr, ok := point[int64](t, r.reader, policyotel.MetricGRPCTransparentRetries, "{transparent_retry}", r.attrs)
	require.True(t, ok, "no %s point", policyotel.MetricGRPCTransparentRetries)
	require.Equal(t, uint64(1), tr.Count, "calls recorded")
	require.Equal(t, int64(1), tr.Sum, "transparent retries")
	require.Equal(t, []float64{1, 2, 3, 4, 5, 10}, tr.Bounds, "%s buckets", policyotel.MetricGRPCTransparentRetries)
	_, ok = point[int64](t, r.reader, policyotel.MetricGRPCRetries, "{retry}", r.attrs)
	require.False(t, ok, "a call the pipeline made once recorded retries")
	delay, ok := point[float64](t, r.reader, policyotel.MetricGRPCRetryDelay, "s", r.attrs)
	require.True(t, ok, "no %s point", policyotel.MetricGRPCRetryDelay)
	require.Equal(t, time.Duration(0).Seconds(), delay.Sum, "retry delay")
}
