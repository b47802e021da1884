package fleettest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisCli is returned by StartCluster when redis-cli, which creates the
// cluster, is not on the PATH.
var ErrNoRedisCli = errors.New("fleettest: redis-cli is not installed (Debian: apt-get install -y redis-tools)")

// NodeTimeout is the cluster-node-timeout of a [Cluster]: how long a primary may be
// silent before its replica takes over. Redis's default is 15 s.
const NodeTimeout = 500 * time.Millisecond

// Cluster is a Redis Cluster of redis-server processes on loopback, each primary
// with one replica. It is not safe for concurrent use.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts 2 × primaries redis-servers in dir, joins them into a cluster
// with redis-cli --cluster create (one replica per primary) and returns once every
// node reports cluster_state:ok, or ctx ends. Stop stops every node.
func StartCluster(ctx context.Context, dir string, primaries int) (*Cluster, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, ErrNoRedisCli
	}
	c := &Cluster{}
	for i := range 2 * primaries {
		// The cluster bus needs a port of its own; port + 10000, Redis's choice, may
		// be past 65535 for a port the kernel hands out.
		bus, err := freePort()
		if err != nil {
			c.Stop()
			return nil, err
		}
		s, err := Start("--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--dir", dir,
			"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout.Milliseconds())),
			"--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0",
			// A replica is listed in CLUSTER SLOTS once its primary's replication
			// offset moves, which a quiet primary's pings do every period.
			"--repl-ping-replica-period", "1")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("fleettest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.poll(ctx, c.replicated); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// replicated reports whether every primary has a replica that is in sync with it.
func (c *Cluster) replicated(ctx context.Context) (bool, string) {
	for _, n := range c.live() {
		slots, err := c.Slots(ctx, n.Addr())
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slots {
			if len(s.Replicas) == 0 {
				return false, fmt.Sprintf("%s: slots %d-%d have no replica", n.Addr(), s.Start, s.End)
			}
			info, err := c.do(ctx, s.Primary, func(ctx context.Context, r *redis.Client) (string, error) {
				return r.Info(ctx, "replication").Result()
			})
			if err != nil {
				return false, err.Error()
			}
			if !strings.Contains(info, "state=online") {
				return false, s.Primary + ": no replica online"
			}
		}
	}
	return true, ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addrs returns the host:port of every node, killed ones included.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.Addr())
	}
	return a
}

// Kill kills the node at addr with SIGKILL, as a crash would, and waits for it to
// exit.
func (c *Cluster) Kill(addr string) {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			n.Stop()
		}
	}
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// live returns the nodes that run.
func (c *Cluster) live() []*Server {
	var l []*Server
	for _, n := range c.nodes {
		if n.cmd != nil {
			l = append(l, n)
		}
	}
	return l
}

// WaitOK polls every running node until each reports cluster_state:ok with all
// 16384 slots served, and each one's slot map names only running primaries; it
// returns ctx's error if that does not happen before ctx ends.
func (c *Cluster) WaitOK(ctx context.Context) error { return c.poll(ctx, c.ok) }

// poll calls cond every 20 ms until it holds or ctx ends.
func (c *Cluster) poll(ctx context.Context, cond func(context.Context) (bool, string)) error {
	var last string
	for {
		ok, why := cond(ctx)
		if ok {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleettest: the cluster is not ready: %s: %w", last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) ok(ctx context.Context) (bool, string) {
	live := c.live()
	var addrs []string
	for _, n := range live {
		addrs = append(addrs, n.Addr())
	}
	for _, n := range live {
		info, err := c.do(ctx, n.Addr(), func(ctx context.Context, r *redis.Client) (string, error) {
			return r.ClusterInfo(ctx).Result()
		})
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return false, n.Addr() + ": " + strings.Join(strings.Fields(info)[:4], " ")
		}
		slots, err := c.Slots(ctx, n.Addr())
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slots {
			if !slices.Contains(addrs, s.Primary) {
				return false, fmt.Sprintf("%s: slots %d-%d served by %s, which is down", n.Addr(), s.Start, s.End, s.Primary)
			}
		}
	}
	return true, ""
}

func (c *Cluster) do(ctx context.Context, addr string, f func(context.Context, *redis.Client) (string, error)) (string, error) {
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second})
	defer r.Close()
	return f(ctx, r)
}

// SlotRange is a range of slots and the primary that serves it.
type SlotRange struct {
	Start, End int
	Primary    string   // host:port
	Replicas   []string // host:port
}

// Slots returns the slot map as the node at addr knows it.
func (c *Cluster) Slots(ctx context.Context, addr string) ([]SlotRange, error) {
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DialTimeout: time.Second})
	defer r.Close()
	shards, err := r.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []SlotRange
	for _, sh := range shards {
		var primary string
		var replicas []string
		for _, n := range sh.Nodes {
			addr := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			switch {
			case n.Role == "master" && n.Health != "fail":
				primary = addr
			case n.Role != "master":
				replicas = append(replicas, addr)
			}
		}
		for _, sl := range sh.Slots {
			out = append(out, SlotRange{Start: int(sl.Start), End: int(sl.End), Primary: primary, Replicas: replicas})
		}
	}
	return out, nil
}
