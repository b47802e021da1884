package goredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// A script that never ends keeps the server busy: past busy-reply-threshold it
// answers BUSY to every other command, without running it. The adapter retries a
// GET — and an INCR, which did not run either — three times; once the script is
// killed, commands run again.
func TestBusyScript_Retried(t *testing.T) {
	s := startRedis(t, "--busy-reply-threshold", "10")
	adm, runner := admin(t, s.Addr()), admin(t, s.Addr())
	script := make(chan error, 1)
	go func() { script <- runner.Eval(bg, "while true do end", nil).Err() }()
	for { // a round trip per look, until the server answers BUSY
		err := adm.Get(bg, "probe").Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			require.ErrorContains(t, err, "BUSY", "GET while the script runs")
			break
		}
	}
	c, n := adapted(t, s.Addr(), policy.Must(policy.Wrap(retry3())))
	n.take()
	for _, cmd := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"get", func(ctx context.Context) error { return c.Get(ctx, "k").Err() }},
		{"incr", func(ctx context.Context) error { return c.Incr(ctx, "n").Err() }},
	} {
		err := cmd.run(bg)
		require.ErrorContains(t, err, "BUSY", "%s while the script runs", cmd.name)
		require.Equal(t, 3, n.take(), "sends of %s while the script runs", cmd.name)
	}
	// go-redis alone (a STRLEN), and a Backstop retry around it (an HLEN): the server
	// counts what it refused, read once the script is killed (INFO is refused too).
	plain := ownRetries(t, s.Addr())
	require.ErrorContains(t, plain.StrLen(bg, "k").Err(), "BUSY")
	err := policy.Must(policy.Wrap(retry3())).Do(bg, func(ctx context.Context) error { return fault.Retryable(plain.HLen(ctx, "k").Err()) })
	require.ErrorContains(t, err, "BUSY")

	// Under a caller that owns the call path, each of its attempts sends once.
	owner := policy.Must(policy.Wrap(retry3()))
	err = owner.Do(bg, func(ctx context.Context) error { return c.Get(ctx, "k").Err() })
	require.ErrorContains(t, err, "BUSY")
	require.Equal(t, 3, n.take(), "sends of GET under an owner making 3 attempts")

	require.NoError(t, adm.ScriptKill(bg).Err())
	require.ErrorContains(t, <-script, "killed", "the script's end")
	_, alone := serverCalls(t, adm, "strlen")
	_, naive := serverCalls(t, adm, "hlen")
	t.Logf("server-counted sends of one read on BUSY: go-redis alone %d, naive stack %d, adapter 3", alone, naive)
	require.Equal(t, 3*alone, naive, "a Backstop retry multiplies go-redis's sends")
	require.NoError(t, c.Incr(bg, "n").Err())
	require.Equal(t, 1, n.take())
	v, err := adm.Get(bg, "n").Int()
	require.NoError(t, err)
	require.Equal(t, 1, v, "INCR ran once: the BUSY ones did not run")
}
