package shed_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/shed"
)

// TestMiddleware_SlowUploadsDoNotStarveTheServer: 100 raw TCP clients send their
// headers and one byte of a 1 000-byte body, then nothing, so 100 handlers wait in
// a body read. At a limit of 20 the shedder still serves all 100 normal requests that
// follow: a handler waiting on its client's body holds no slot.
func TestMiddleware_SlowUploadsDoNotStarveTheServer(t *testing.T) {
	s := policy.Must(shed.New(shed.Options{Limit: shed.LimitOptions{Fixed: 20}, Queue: shed.QueueOptions{Max: 256}}))
	entered := make(chan struct{}, 200)
	h := shed.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			var b [1]byte
			_, _ = io.ReadFull(r.Body, b[:]) // the byte sent; the next read waits on the client
			entered <- struct{}{}
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}), s)
	srv := httptest.NewServer(h)
	defer srv.Close()

	const slow = 100
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range slow {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\na")
		require.NoError(t, err)
	}
	timeout := time.After(30 * time.Second) // a bound on the test, not an assertion
	for range slow {
		select {
		case <-entered:
		case <-timeout:
			t.Fatal("the slow uploads never reached their handlers")
		}
	}

	served := 0
	c := srv.Client()
	for range 100 {
		res, err := c.Get(srv.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			served++
		}
	}
	require.GreaterOrEqual(t, served, 95, "normal requests served of 100 beside %d slow uploads (in flight %d, limit %d)", slow, s.InFlight(), s.Limit())
}
