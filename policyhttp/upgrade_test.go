package policyhttp_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"

	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policy/policytest"
	"github.com/backstop-go/backstop/policyhttp"
	"github.com/backstop-go/backstop/retry"
)

// echoServer is a server on 127.0.0.1 that switches every request asking for
// "Upgrade: echo" to a protocol that sends back every byte it receives, as a
// WebSocket server takes over its connection with Hijack.
type echoServer struct {
	*httptest.Server
	handshakes atomic.Int64
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	s := &echoServer{}
	var conns sync.WaitGroup // hijacked connections: the server no longer tracks them
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "ask for Upgrade: echo", http.StatusUpgradeRequired)
			return
		}
		s.handshakes.Add(1)
		conns.Add(1)
		defer conns.Done()
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(hangBound)) // a bound on a hung test
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		if brw.Flush() != nil {
			return
		}
		_, _ = io.Copy(conn, brw.Reader) // until the client closes
	}))
	t.Cleanup(func() { s.Close(); conns.Wait() })
	return s
}

func upgradeRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req := get(t, url)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	return req
}

// upgradeClient is a client whose transport runs a 3-attempt retrying pipeline over
// net/http's own transport (policytest.Bodies would hide the connection's Write).
func upgradeClient(t *testing.T, opts policyhttp.Options) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	clock := policytest.NewClock(t0).AutoAdvance(true)
	p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Clock: clock, Rand: zeroRand{}}))))
	return &http.Client{Transport: policyhttp.NewTransport(base, p, opts)}
}

func do(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	res, err := c.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// echo writes msg through the upgraded connection and reads it back.
func echo(t *testing.T, res *http.Response, msg string) {
	t.Helper()
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	rw, ok := res.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the Body of a 101 is %T; want an io.ReadWriteCloser, as net/http's transport returns", res.Body)
	_, err := io.WriteString(rw, msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(rw, got)
	require.NoError(t, err)
	require.Equal(t, msg, string(got), "the bytes written through the body come back")
}

// TestTransport_UpgradeBodyIsTheConnection: a WebSocket-style upgrade made through a
// retrying pipeline hands back the switched connection, readable and writable.
func TestTransport_UpgradeBodyIsTheConnection(t *testing.T) {
	srv := newEchoServer(t)
	res := do(t, upgradeClient(t, policyhttp.Options{}), upgradeRequest(t, srv.URL))
	echo(t, res, "ping\n")
	echo(t, res, "and again\n")
	require.NoError(t, res.Body.Close())
	require.Equal(t, int64(1), srv.handshakes.Load())
}

// TestTransport_NeverRetriesAnUpgrade: even a classifier that calls every response a
// retryable failure does not make the transport retry a switched connection (or
// drain it, which would wait for the other side to speak): the 101 is the answer.
func TestTransport_NeverRetriesAnUpgrade(t *testing.T) {
	srv := newEchoServer(t)
	c := upgradeClient(t, policyhttp.Options{Classifier: func(*http.Response, time.Time) error {
		return fault.Retryable(errors.New("every response fails"))
	}})
	res := do(t, c, upgradeRequest(t, srv.URL))
	require.Equal(t, int64(1), srv.handshakes.Load(), "handshakes")
	echo(t, res, "ping\n")
}

// conn is an in-memory connection that echoes: what is written is read back.
type conn struct{ bytes.Buffer }

func (*conn) Close() error { return nil }

// TestTransport_NeverHedgesAnUpgrade: a hedge would open a second connection for one
// upgrade; a request asking for one goes out once.
func TestTransport_NeverHedgesAnUpgrade(t *testing.T) {
	clock := policytest.NewClock(t0).AutoAdvance(true)
	g := &gated{started: make(chan int, 4), gates: map[int]chan *http.Response{}}
	p := policy.Must(policy.Wrap(policy.Must(retry.NewHedge(retry.HedgeOptions{Delay: -1, Clock: clock})))) // all attempts at once
	client := &http.Client{Transport: policyhttp.NewTransport(g, p, policyhttp.Options{})}
	g.gate(1) <- &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{}, Body: &conn{}}
	res, err := client.Do(upgradeRequest(t, "http://backend.test/ws"))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Len(t, g.started, 1, "a request asking for an upgrade goes out once")
	echo(t, res, "ping")
}
