package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/goredis"
	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The two owners compared: go-redis's own retries as they come (MaxRetries 3, no
// Backstop), and Backstop as the owner (a retry of 4 attempts, go-redis's off).
var owners = []struct {
	name   string
	client func(t *testing.T, opt redis.Options) *redis.Client
}{
	{"go-redis MaxRetries 3", func(t *testing.T, opt redis.Options) *redis.Client {
		opt.MaxRetries, opt.MinRetryBackoff, opt.MaxRetryBackoff = 3, time.Millisecond, time.Millisecond
		c := redis.NewClient(&opt)
		t.Cleanup(func() { c.Close() })
		return c
	}},
	{"Backstop owner", func(t *testing.T, opt redis.Options) *redis.Client {
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: time.Millisecond, Cap: time.Millisecond}))))
		c, err := goredis.NewClient(opt, p, goredis.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}},
}

// send runs cmd ("get k" or "incr n") on c.
func send(c *redis.Client, cmd string) error {
	if cmd == "get" {
		err := c.Get(bg, "k").Err()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	}
	return c.Incr(bg, "n").Err()
}

// An error reply, from a real redis-server, is retried by go-redis's own retries and
// by Backstop as the owner alike, or by neither: each owner's sends of one command,
// counted by the server (INFO commandstats), are 4 or 1. One class differs on
// purpose: BUSY, which go-redis does not retry and Backstop does (the server ran
// nothing, and says so). Each owner meets a server of its own.
func TestConformance_ErrorReplies(t *testing.T) {
	plain := func(args ...string) func(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
		return func(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
			s := startRedis(t, args...)
			connect(s.Addr())
			return s, func() {}
		}
	}
	cases := []struct {
		class string
		// start starts a server answering class, calling connect with its address
		// before the state begins; settle ends the state.
		start func(t *testing.T, connect func(addr string)) (s *fleettest.Server, settle func())
		cmd   string
		own   int // sends by go-redis's own retries
		ours  int // sends by Backstop as the owner
	}{
		{"READONLY", plain("--replicaof", "127.0.0.1", "1"), "incr", 4, 4},
		{"MASTERDOWN", plain("--replicaof", "127.0.0.1", "1", "--replica-serve-stale-data", "no"), "get", 4, 4},
		{"NOREPLICAS", plain("--min-replicas-to-write", "1"), "incr", 4, 4},
		{"CLUSTERDOWN", func(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
			s := clusterNode(t)
			connect(s.Addr())
			return s, func() {}
		}, "get", 4, 4},
		{"MOVED", movedCluster, "get", 1, 1},
		{"LOADING", loading, "get", 4, 4},
		{"BUSY", busy, "get", 1, 4},
		{"WRONGTYPE", func(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
			s := startRedis(t)
			require.NoError(t, admin(t, s.Addr()).LPush(bg, "n", "x").Err())
			connect(s.Addr())
			return s, func() {}
		}, "incr", 1, 1},
	}
	for _, tc := range cases {
		for i, o := range owners {
			t.Run(tc.class+"/"+o.name, func(t *testing.T) {
				var c *redis.Client
				s, settle := tc.start(t, func(addr string) {
					opt := quick
					opt.Addr = addr
					c = o.client(t, opt)
					// A connection made before the state begins; a replica without its
					// primary answers PING MASTERDOWN, after the connection is made.
					if err := c.Ping(bg).Err(); redisReply(err) == "" {
						require.NoError(t, err, "PING")
					}
				})
				err := send(c, tc.cmd)
				settle()
				require.Error(t, err, "%s", tc.cmd)
				require.True(t, strings.HasPrefix(redisReply(err), tc.class), "%s: %v, want %s", tc.cmd, err, tc.class)
				got := sent(t, admin(t, s.Addr()), tc.cmd)
				require.Equal(t, []int{tc.own, tc.ours}[i], got, "sends of %s answered %s", tc.cmd, tc.class)
			})
		}
	}
}

// redisReply returns the error reply err carries, or "".
func redisReply(err error) string {
	var re redis.Error
	if errors.As(err, &re) {
		return re.Error()
	}
	return ""
}

// sent returns how many times the server received command name: run or refused.
func sent(t *testing.T, adm *redis.Client, name string) int {
	t.Helper()
	calls, rejected := serverCalls(t, adm, name)
	return calls + rejected
}

// clusterNode starts a node of a cluster that serves no slot yet: every key's
// command is answered CLUSTERDOWN. It serves reads while the cluster is down (as it
// is for 2 s after a start), so a read of a slot another node serves is redirected
// at once.
func clusterNode(t *testing.T) *fleettest.Server {
	t.Helper()
	return startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf",
		"--cluster-allow-reads-when-down", "yes")
}

// movedCluster starts two nodes of one cluster, each serving half the slots, and
// returns the one that does not serve "k": it answers MOVED for it.
func movedCluster(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
	t.Helper()
	a, b := clusterNode(t), clusterNode(t) // b serves "k", a the other half
	ca, cb := admin(t, a.Addr()), admin(t, b.Addr())
	slot, err := ca.ClusterKeySlot(bg, "k").Result()
	require.NoError(t, err)
	half := int(slot / 8192 * 8192)
	require.NoError(t, cb.ClusterAddSlotsRange(bg, half, half+8191).Err())
	require.NoError(t, ca.ClusterAddSlotsRange(bg, 8192-half, 8192-half+8191).Err())
	host, port, _ := strings.Cut(b.Addr(), ":")
	require.NoError(t, ca.ClusterMeet(bg, host, port).Err())
	for { // a round trip per look, until a knows who serves the other half
		shards, err := ca.ClusterShards(bg).Result()
		require.NoError(t, err)
		served := 0
		for _, sh := range shards {
			served += len(sh.Slots)
		}
		if served == 2 {
			break
		}
	}
	connect(a.Addr())
	return a, func() {}
}

// loading starts a server that stays a while in LOADING: DEBUG RELOAD loads its
// dataset again, 20 ms per key (30 keys of 2 KB, uncompressed, so the server answers
// other clients after each key), and every other client is answered LOADING until
// the load ends, which settle waits for.
func loading(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
	t.Helper()
	s := startRedis(t, "--enable-debug-command", "yes", "--dir", t.TempDir(),
		"--key-load-delay", "20000", "--loading-process-events-interval-bytes", "1024", "--rdbcompression", "no")
	adm, reloader := admin(t, s.Addr()), admin(t, s.Addr())
	require.NoError(t, adm.Do(bg, "debug", "populate", "30", "key", "2000").Err())
	connect(s.Addr())
	done := make(chan error, 1)
	go func() { done <- reloader.Do(context.Background(), "debug", "reload").Err() }()
	for { // a round trip per look, until the server answers LOADING
		err := adm.Exists(bg, "k").Err()
		if err != nil {
			require.True(t, strings.HasPrefix(redisReply(err), "LOADING"), "EXISTS during DEBUG RELOAD: %v", err)
			return s, func() { require.NoError(t, <-done, "DEBUG RELOAD") }
		}
	}
}

// busy starts a server running a script that never ends, past busy-reply-threshold:
// it answers BUSY to every other command without running it, until settle kills
// the script.
func busy(t *testing.T, connect func(addr string)) (*fleettest.Server, func()) {
	t.Helper()
	s := startRedis(t, "--busy-reply-threshold", "10")
	adm, runner := admin(t, s.Addr()), admin(t, s.Addr())
	connect(s.Addr())
	script := make(chan error, 1)
	go func() { script <- runner.Eval(context.Background(), "while true do end", nil).Err() }()
	for { // a round trip per look, until the server answers BUSY
		err := adm.Exists(bg, "probe").Err()
		if err != nil {
			require.ErrorContains(t, err, "BUSY")
			return s, func() {
				require.NoError(t, adm.ScriptKill(bg).Err())
				require.ErrorContains(t, <-script, "killed")
			}
		}
	}
}

// A connection lost under a command, through Toxiproxy in front of a real
// redis-server: the next connection finds the network healed. Both owners retry a
// GET after a lost request, a lost reply or a read timeout, and it succeeds on a new
// connection. They differ on purpose for an INCR: go-redis sends it again, and runs
// it twice when its reply was lost; Backstop does not retry a command that may have
// run (Once or Idempotent say when it may).
func TestConformance_NetworkFaults(t *testing.T) {
	s := startRedis(t)
	adm := admin(t, s.Addr())
	f := startFaults(t, s.Addr())
	cases := []struct {
		class        string
		kind, stream string
		cmd          string
		own, ours    bool // retried
	}{
		{"reset, request lost", "reset_peer", "upstream", "get", true, true},
		{"reset, reply lost", "reset_peer", "downstream", "get", true, true},
		{"read timeout", "timeout", "downstream", "get", true, true},
		{"reset, request lost", "reset_peer", "upstream", "incr", true, false},
		{"reset, reply lost", "reset_peer", "downstream", "incr", true, false},
		{"read timeout", "timeout", "downstream", "incr", true, false},
	}
	for _, tc := range cases {
		for i, o := range owners {
			opt := quick
			opt.Addr, opt.PoolSize, opt.Dialer, opt.ReadTimeout = f.Addr(), 1, f.dial, 100*time.Millisecond
			c := o.client(t, opt)
			require.NoError(t, c.Ping(bg).Err()) // an idle connection for the toxic to meet
			runs, _ := serverCalls(t, adm, tc.cmd)
			dials := f.dials.Load()
			f.arm(t, tc.kind, tc.stream)
			err := send(c, tc.cmd)
			f.heal()
			retried := f.dials.Load() > dials
			after, _ := serverCalls(t, adm, tc.cmd)
			t.Logf("%s, %s, %s: retried %v, runs %d, error %v", o.name, tc.class, tc.cmd, retried, after-runs, err)
			want := []bool{tc.own, tc.ours}[i]
			require.Equal(t, want, retried, "%s: %s of %s: retried", o.name, tc.class, tc.cmd)
			if want {
				require.NoError(t, err, "%s: %s of %s, retried", o.name, tc.class, tc.cmd)
			} else {
				require.Error(t, err, "%s: %s of %s, not retried", o.name, tc.class, tc.cmd)
			}
			if tc.cmd == "incr" {
				lost := map[bool]int{true: 1, false: 0}[tc.stream == "downstream"] // the lost send ran
				require.Equal(t, lost+map[bool]int{true: 1, false: 0}[want], after-runs, "%s: %s of INCR: runs", o.name, tc.class)
			}
		}
	}
}
