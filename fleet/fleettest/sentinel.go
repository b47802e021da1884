package fleettest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name a [Sentinel] monitors its primary by.
const MasterName = "fleet"

// Sentinel is a primary, its replica and one Redis Sentinel (redis-server
// --sentinel, so the redis-sentinel package is not needed) that promotes the
// replica when the primary has been silent for NodeTimeout.
type Sentinel struct {
	Primary, Replica, Sentinel *Server
}

// StartSentinel starts a primary, a replica of it and a Sentinel monitoring it, in
// dir; it returns once the replica is in sync and the Sentinel knows it, or ctx ends.
// Stop stops them all.
func StartSentinel(ctx context.Context, dir string) (*Sentinel, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	st := &Sentinel{}
	var err error
	// Each in dir: a replica writes the data it receives to a file there.
	st.Primary, err = Start("--dir", dir, "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1")
	if err != nil {
		return nil, err
	}
	host, port := "127.0.0.1", strconv.Itoa(st.Primary.port)
	st.Replica, err = Start("--dir", dir, "--dbfilename", "replica.rdb", "--replicaof", host, port,
		"--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1")
	if err != nil {
		st.Stop()
		return nil, err
	}
	sp, err := freePort()
	if err != nil {
		st.Stop()
		return nil, err
	}
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: it must be a file of its own
	text := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s %[5]d\n",
		MasterName, host, port, NodeTimeout.Milliseconds(), 4*NodeTimeout.Milliseconds())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		st.Stop()
		return nil, err
	}
	st.Sentinel = &Server{port: sp, conf: conf, args: []string{"--sentinel", "--dir", dir},
		ready: "Sentinel ID is"}
	if err := st.Sentinel.Restart(); err != nil {
		st.Stop()
		return nil, err
	}
	c := &Cluster{}
	err = c.poll(ctx, func(ctx context.Context) (bool, string) {
		info, err := c.do(ctx, st.Primary.Addr(), func(ctx context.Context, r *redis.Client) (string, error) {
			return r.Info(ctx, "replication").Result()
		})
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(info, "state=online") {
			return false, "the replica is not in sync"
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: st.Sentinel.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		defer sc.Close()
		m, err := sc.Master(ctx, MasterName).Result()
		if err != nil {
			return false, err.Error()
		}
		if m["num-slaves"] != "1" {
			return false, fmt.Sprintf("the Sentinel does not know the replica yet: %v", m)
		}
		return true, ""
	})
	if err != nil {
		st.Stop()
		return nil, err
	}
	return st, nil
}

// WaitPromoted polls the Sentinel until it names the replica as the primary, and
// the replica says it is one, or ctx ends.
func (st *Sentinel) WaitPromoted(ctx context.Context) error {
	c := &Cluster{}
	return c.poll(ctx, func(ctx context.Context) (bool, string) {
		sc := redis.NewSentinelClient(&redis.Options{Addr: st.Sentinel.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		defer sc.Close()
		a, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
		addr := strings.Join(a, ":")
		if err != nil || addr != st.Replica.Addr() {
			return false, fmt.Sprintf("the Sentinel names %q (%v)", addr, err)
		}
		role, err := c.do(ctx, st.Replica.Addr(), func(ctx context.Context, r *redis.Client) (string, error) {
			return r.Info(ctx, "replication").Result()
		})
		if err != nil || !strings.Contains(role, "role:master") {
			return false, "the replica is not a primary yet"
		}
		return true, ""
	})
}

// Stop kills every process.
func (st *Sentinel) Stop() {
	for _, s := range []*Server{st.Sentinel, st.Replica, st.Primary} {
		if s != nil {
			s.Stop()
		}
	}
}
