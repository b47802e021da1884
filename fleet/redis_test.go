package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backstop-go/backstop/policy"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-go/backstop/fleet/fleettest"
	"github.com/backstop-go/backstop/internal/missing"
)

// redisServer is a real redis-server for one test, stopped with it.
type redisServer struct {
	t testing.TB
	*fleettest.Server
}

// startRedis starts a redis-server for t; it is stopped when t ends.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	s, err := fleettest.Start()
	if errors.Is(err, fleettest.ErrNoRedis) {
		missing.Skip(t, "redis-server", "apt-get install redis-server")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &redisServer{t: t, Server: s}
}

func (s *redisServer) addr() string { return s.Addr() }
func (s *redisServer) stop()        { s.Stop() }

func (s *redisServer) start() {
	s.t.Helper()
	if err := s.Restart(); err != nil {
		s.t.Fatal(err)
	}
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
	st := policy.Must(New(s.client(t), o))
	st.manual = true
	return st
}

// admin returns a client for the test's own reads and writes.
func (s *redisServer) admin(t testing.TB) *redis.Client { return s.client(t) }

var bg = context.Background()
