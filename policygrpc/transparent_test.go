package policygrpc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/backstop-go/backstop/policygrpc"
)

// refusing is a bare HTTP/2 server that answers gRPC requests from a script: it
// refuses the first stream (RST_STREAM REFUSED_STREAM, which tells the client the
// request was not processed), fails the second in trailers only with UNAVAILABLE and
// a 10 ms pushback, and answers the others with an empty message and OK. It records
// the grpc-previous-rpc-attempts of each stream it sees.
type refusing struct {
	mu   sync.Mutex
	prev []string // per stream, in order
}

func (s *refusing) streams() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prev...)
}

// serve accepts one connection on ln and answers it until it closes.
func (s *refusing) serve(ln net.Listener) error {
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.ReadFull(conn, make([]byte, len(http2.ClientPreface))); err != nil {
		return err
	}
	w := bufio.NewWriter(conn)
	fr := http2.NewFramer(w, bufio.NewReader(conn))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	prev := map[uint32]string{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil // the client closed the connection
		}
		var ended uint32
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			prev[f.StreamID] = ""
			for _, hf := range f.Fields {
				if hf.Name == policygrpc.MetadataPreviousAttempts {
					prev[f.StreamID] = hf.Value
				}
			}
			if f.StreamEnded() {
				ended = f.StreamID
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				ended = f.StreamID
			}
		}
		if err == nil && ended != 0 {
			err = s.answer(fr, ended, prev[ended])
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// answer answers the stream sid once the client has sent all of it.
func (s *refusing) answer(fr *http2.Framer, sid uint32, prev string) error {
	s.mu.Lock()
	s.prev = append(s.prev, prev)
	n := len(s.prev)
	s.mu.Unlock()
	headers := func(end bool, kv ...string) error {
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		for i := 0; i < len(kv); i += 2 {
			if err := enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}); err != nil {
				return err
			}
		}
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: buf.Bytes(), EndStream: end, EndHeaders: true})
	}
	switch n {
	case 1:
		return fr.WriteRSTStream(sid, http2.ErrCodeRefusedStream)
	case 2:
		return headers(true, ":status", "200", "content-type", "application/grpc",
			"grpc-status", "14", "grpc-message", "unavailable retry", policygrpc.MetadataPushback, "10")
	}
	if err := headers(false, ":status", "200", "content-type", "application/grpc"); err != nil {
		return err
	}
	if err := fr.WriteData(sid, false, []byte{0, 0, 0, 0, 0}); err != nil { // an empty message
		return err
	}
	return headers(true, "grpc-status", "0")
}

// TestConformance_TransparentRetry is grpc-go's TestRetryStats whole: its first
// stream is refused before the server processed it, which grpc-go retries
// transparently (A6 allows it: the RPC never reached the application). It does so
// beneath interceptors, for Backstop's channel as for its own retry: the stats
// handler sees the transparent attempt, the server sees three streams, and Backstop
// counts two attempts, as grpc-go's retry does (a transparent retry sends no
// grpc-previous-rpc-attempts and costs no throttling token).
func TestConformance_TransparentRetry(t *testing.T) {
	compare(t, "transparent retry", func(t *testing.T, o owner) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := &refusing{}
		done := make(chan error, 1)
		go func() { done <- srv.serve(ln) }()
		t.Cleanup(func() { // after the channel's own cleanup closed the connection
			_ = ln.Close() // if the test ended before any connection
			if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("the bare HTTP/2 server: %v", err)
			}
		})
		h := &statsRecorder{}
		ch := o.dial(t, ln.Addr().String(), retryConfig(4, `"UNAVAILABLE"`, ""), 0, grpc.WithStatsHandler(h))
		_, err = ch.EmptyCall(t.Context(), &testgrpc.Empty{})
		require.NoError(t, err)
		// The stats handler's attempts: a Begin each, one of them transparent.
		h.mu.Lock()
		begins, transparent := 0, h.transparent
		for _, e := range h.events {
			if e == "Begin" {
				begins++
			}
		}
		h.mu.Unlock()
		require.Equal(t, 3, begins, "RPC attempts the stats handler saw")
		require.Equal(t, 1, transparent, "transparent retries the stats handler saw")
		require.NoError(t, ln.Close())
		return fmt.Sprintf("streams prev=%q begins=%d transparent=%d", srv.streams(), begins, transparent)
	})
}
