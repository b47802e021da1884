package goredis_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// lossy is a TCP proxy in front of a real server that loses the reply to every INCR:
// the server runs the command, then the connection breaks before its answer reaches
// the client — the failure after which no client can know whether a write ran.
type lossy struct {
	l     net.Listener
	to    string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func newLossy(t *testing.T, to string) *lossy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossy{l: l, to: to}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *lossy) addr() string { return p.l.Addr().String() }

func (p *lossy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *lossy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *lossy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		var incr atomic.Bool // an INCR went up: its answer is lost
		p.wg.Go(func() {     // client → server
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if bytes.Contains(bytes.ToLower(buf[:n]), []byte("\r\nincr\r\n")) {
						incr.Store(true)
					}
					if _, err := s.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
		})
		p.wg.Go(func() { // server → client
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && incr.Load() {
					break // the server answered the INCR: cut
				}
				if n > 0 {
					if _, err := c.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
			s.Close()
		})
	}
}

// An INCR whose reply is lost ran on the server. go-redis alone sends it again (4
// runs), a Backstop retry around that client again (12), the adapter never (1).
func TestAttempts_LostReplyOfIncr(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	proxy := newLossy(t, s.Addr())
	runs := func() int {
		calls, _ := serverCalls(t, adm, "incr")
		return calls
	}

	alone := quick
	alone.Addr, alone.MinRetryBackoff, alone.MaxRetryBackoff = proxy.addr(), time.Millisecond, time.Millisecond
	plain := redis.NewClient(&alone)
	defer plain.Close()
	require.Error(t, plain.Incr(bg, "n").Err())
	require.Equal(t, 4, runs(), "runs of one INCR by go-redis alone")

	p := policy.MustWrap(retry3())
	err := p.Do(bg, func(ctx context.Context) error { return fault.Retryable(plain.Incr(ctx, "n").Err()) })
	require.Error(t, err)
	require.Equal(t, 4+12, runs(), "runs of one INCR by Backstop around go-redis's retries")

	c, _ := adapted(t, proxy.addr(), p)
	err = c.Incr(bg, "n").Err()
	require.ErrorIs(t, err, io.EOF, "INCR through the adapter")
	require.True(t, fault.Of(err).Permanent, "a lost reply of INCR is Permanent: %v", err)
	require.Equal(t, 4+12+1, runs(), "runs of one INCR through the adapter")

	err = c.Incr(goredis.Idempotent(bg), "n").Err()
	require.Error(t, err)
	require.Equal(t, 4+12+1+3, runs(), "runs of one INCR under Idempotent through the adapter")
	n, err := adm.Get(bg, "n").Int()
	require.NoError(t, err)
	require.Equal(t, 4+12+1+3, n, "the counter: every run counted")
}
