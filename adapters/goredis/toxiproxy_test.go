package goredis_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// faults is a Toxiproxy proxy, run in this process, between a test's clients and a
// real redis-server. A fault is a toxic added while a connection is idle in the
// pool: it acts on that connection's next bytes. Every new connection heals the
// network first (the toxics are removed before it dials), so a retry reaches the
// server as it would once a real network recovers.
type faults struct {
	proxy *toxiproxy.Proxy
	dials atomic.Int64
	mu    sync.Mutex
	armed []string // guarded by mu
	held  bool     // guarded by mu: new connections do not heal the network
}

// startFaults starts a proxy in front of the server at addr, stopped when t ends.
func startFaults(t testing.TB, addr string) *faults {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "redis", "127.0.0.1:0", addr)
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	return &faults{proxy: p}
}

// Addr returns the proxy's address.
func (f *faults) Addr() string { return f.proxy.Listen }

// arm adds a toxic of kind ("reset_peer", "timeout") on stream ("upstream": the
// client's requests; "downstream": the server's replies), with timeout 0: a
// reset_peer drops the next bytes and resets the connection at once, a timeout drops
// every byte and holds the connection open.
func (f *faults) arm(t testing.TB, kind, stream string) {
	t.Helper()
	name := kind + "_" + stream
	_, err := f.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": {"timeout": 0}}`, name, kind, stream)))
	require.NoError(t, err, "add toxic %s", name)
	f.mu.Lock()
	f.armed = append(f.armed, name)
	f.mu.Unlock()
}

// heal removes every toxic armed.
func (f *faults) heal() {
	f.mu.Lock()
	armed := f.armed
	f.armed = nil
	f.mu.Unlock()
	for _, name := range armed {
		_ = f.proxy.Toxics.RemoveToxic(context.Background(), name)
	}
}

// dial is a redis.Options.Dialer that heals the network unless held, counts the
// dial and dials.
func (f *faults) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	held := f.held
	f.mu.Unlock()
	if !held {
		f.heal()
	}
	f.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
