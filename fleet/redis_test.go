package fleet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a real redis-server on a free 127.0.0.1 port, without persistence,
// started by a test and stopped with it.
type redisServer struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for t; it is stopped when t ends.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (Debian: apt-get install -y redis-server); the fleet tests run against a real one")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{t: t, port: port}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server and returns once it accepts connections.
func (s *redisServer) start() {
	s.t.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "notice")
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	// It says so on stdout when it is ready; the rest of its log is drained.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				ready <- nil
				for sc.Scan() {
				}
				return
			}
		}
		ready <- fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", s.port, strings.Join(log, "\n"))
	}()
	if err := <-ready; err != nil {
		_ = cmd.Wait()
		s.t.Fatal(err)
	}
}

// stop kills the server and waits for it to exit.
func (s *redisServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// client returns a client with a pool of its own, as another process would have.
func (s *redisServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), ContextTimeoutEnabled: true,
		MaxRetries: -1, DialTimeout: time.Second, PoolSize: 4})
	t.Cleanup(func() { c.Close() })
	return c
}

// store returns a Store on a client of its own, named id, whose policies sync only
// when the test says.
func (s *redisServer) store(t testing.TB, id string, obs ...func(string, string)) *Store {
	o := Options{ID: id, SyncInterval: time.Hour}
	if len(obs) > 0 {
		o.Observer = fleetEvents(obs[0])
	}
	st := MustNew(s.client(t), o)
	st.manual = true
	return st
}

// admin returns a client for the test's own reads and writes.
func (s *redisServer) admin(t testing.TB) *redis.Client { return s.client(t) }

var bg = context.Background()
