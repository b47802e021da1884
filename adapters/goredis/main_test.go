package goredis_test

import (
	"context"
	"errors"
	"flag"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/internal/missing"
)

// quiet drops go-redis's log: the tests break connections on purpose.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if fleettest.Installed() != nil {
		// An Example cannot skip: without redis-server the Examples are left out, and
		// each test that needs the server skips saying how to install it.
		flag.Parse()
		_ = flag.Set("test.skip", "^Example")
	}
	// A pool that failed to dial probes the server once a second until it answers or
	// the client is closed; the probe then ends at its next wake-up.
	// Toxiproxy (v2.5.0) can leave a toxic's goroutine blocked on a send when a
	// connection closes with bytes in flight; it is the proxy's, not the adapter's.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}

// startRedis starts a real redis-server for t, stopped when t ends.
func startRedis(t testing.TB, args ...string) *fleettest.Server {
	t.Helper()
	s, err := fleettest.Start(args...)
	// fleettest picks a free port and lets it go before the server binds it: under
	// many connections another socket may take it first. A new port is picked.
	for try := 0; try < 3 && err != nil && strings.Contains(err.Error(), "Address already in use"); try++ {
		s, err = fleettest.Start(args...)
	}
	if errors.Is(err, fleettest.ErrNoRedis) {
		missing.Skip(t, "redis-server", "apt-get install redis-server")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// admin returns a plain client for the test's own commands, without retries.
func admin(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// serverCalls returns what the server counted of command name in INFO commandstats:
// the calls it ran and the calls it refused before running them.
func serverCalls(t testing.TB, c *redis.Client, name string) (calls, rejected int) {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "calls":
				calls = n
			case "rejected_calls":
				rejected = n
			}
		}
	}
	return calls, rejected
}

// counter is a hook added after the adapter's: it sees every round trip the adapter
// makes, each command or pipeline once per attempt.
type counter struct{ sends atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" && cmd.Name() != "client" {
			c.sends.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "hello" && cmds[0].Name() != "client" {
			c.sends.Add(1)
		}
		return next(ctx, cmds)
	}
}

func (c *counter) take() int { return int(c.sends.Swap(0)) }

var quick = redis.Options{DialTimeout: time.Second, PoolSize: 2, DisableIdentity: true}

// ownRetries returns a client for addr with go-redis's own retries as they come (3
// retries), their backoff cut to a millisecond: the tests count sends, not time.
func ownRetries(t testing.TB, addr string) *redis.Client {
	opt := quick
	opt.Addr, opt.MinRetryBackoff, opt.MaxRetryBackoff = addr, time.Millisecond, time.Millisecond
	c := redis.NewClient(&opt)
	t.Cleanup(func() { c.Close() })
	return c
}
