package sqltx_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx/internal/pgserver"
)

// faults is a Toxiproxy proxy, run in this process, between the tests' database and
// the real server. A fault is a toxic added while a connection is in use: it acts on
// that connection's next bytes. Every new connection heals the network first (the
// toxics are removed before it dials), so a retry, or the resolution of a lost
// COMMIT, reaches the server as it would once a real network recovers.
type faults struct {
	proxy *toxiproxy.Proxy
	mu    sync.Mutex
	armed []string // guarded by mu
	held  bool     // guarded by mu: new connections do not heal the network
}

// hold says whether new connections leave the toxics in place: the network stays
// down until heal is called.
func (f *faults) hold(held bool) {
	f.mu.Lock()
	f.held = held
	f.mu.Unlock()
}

// startFaults starts a proxy in front of srv, stopped when t ends.
func startFaults(t *testing.T) *faults {
	t.Helper()
	need(t)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", srv.Addr())
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	return &faults{proxy: p}
}

// arm adds a toxic of kind ("reset_peer", "timeout") on stream ("upstream": the
// client's requests; "downstream": the server's answers), with timeout 0: a
// reset_peer drops the next bytes and resets the connection at once, a timeout drops
// every byte and holds the connection open.
func (f *faults) arm(t *testing.T, kind, stream string) {
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

// open returns a database whose connections reach the server through the proxy, use
// schema, and heal the network before they dial.
func (f *faults) open(t *testing.T, schema string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgserver.DSN(f.proxy.Listen) + "&search_path=" + schema)
	require.NoError(t, err)
	db := sql.OpenDB(healing{stdlib.GetConnector(*cfg), f})
	t.Cleanup(func() { db.Close() })
	return db
}

// healing is a driver.Connector that heals the network before each dial.
type healing struct {
	driver.Connector
	f *faults
}

func (h healing) Connect(ctx context.Context) (driver.Conn, error) {
	h.f.mu.Lock()
	held := h.f.held
	h.f.mu.Unlock()
	if !held {
		h.f.heal()
	}
	return h.Connector.Connect(ctx)
}
