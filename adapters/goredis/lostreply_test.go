package goredis_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/lossy"
	"github.com/backstop-go/backstop/policy"
)

// An INCR whose reply is lost ran on the server. go-redis alone sends it again (4
// runs), a Backstop retry around that client again (12), the adapter never (1).
func TestAttempts_LostReplyOfIncr(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	// A proxy loses the reply to every INCR: the server runs it, the client sees the
	// connection break.
	proxy, err := lossy.Start(s.Addr(), func(up []byte) bool {
		return bytes.Contains(bytes.ToLower(up), []byte("\r\nincr\r\n"))
	})
	require.NoError(t, err)
	defer proxy.Close()
	runs := func() int {
		calls, _ := serverCalls(t, adm, "incr")
		return calls
	}

	plain := ownRetries(t, proxy.Addr())
	require.Error(t, plain.Incr(bg, "n").Err())
	require.Equal(t, 4, runs(), "runs of one INCR by go-redis alone")

	p := policy.MustWrap(retry3())
	err = p.Do(bg, func(ctx context.Context) error { return fault.Retryable(plain.Incr(ctx, "n").Err()) })
	require.Error(t, err)
	require.Equal(t, 4+12, runs(), "runs of one INCR by Backstop around go-redis's retries")

	c, _ := adapted(t, proxy.Addr(), p)
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
