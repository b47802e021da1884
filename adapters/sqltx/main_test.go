package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/backstop-go/backstop/adapters/sqltx/internal/pgserver"
	"github.com/backstop-go/backstop/internal/missing"
)

// srv is the server every test of the package shares: a real PostgreSQL, started
// once (initdb takes a while), each test in a schema of its own; dsn is its DSN.
var (
	srv *pgserver.Server
	dsn string
)

func TestMain(m *testing.M) {
	var err error
	srv, err = pgserver.Start()
	switch {
	case errors.Is(err, pgserver.ErrNoPostgres):
		// An Example cannot skip: without PostgreSQL the Examples are left out, and
		// each test skips saying how to install it (need).
		noPostgres = err
		flag.Parse()
		_ = flag.Set("test.skip", "^Example")
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	default:
		dsn = srv.DSN()
	}
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	if code == 0 {
		// Toxiproxy (v2.5.0) can leave a toxic's goroutine blocked on a send when a
		// connection closes with bytes in flight; it is the proxy's, not the adapter's.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var schemas int

// noPostgres is why there is no server, when PostgreSQL is not installed.
var noPostgres error

// need skips t, saying how to install PostgreSQL, when it is not installed.
func need(t *testing.T) {
	t.Helper()
	if noPostgres != nil {
		missing.Skip(t, "postgresql", "apt-get install postgresql")
	}
}

// open returns a database for t whose connections use a schema of t's own, holding
// table acct (id, n) with rows 1 and 2 at 0, and a sequence attempts that each
// attempt of a transaction draws from: sequences ignore rollbacks, so it counts on the
// server every attempt that reached it.
func open(t *testing.T) *sql.DB {
	t.Helper()
	return connect(t, dsn, setup(t))
}

// setup makes a schema for t, as open says, and returns its name.
func setup(t *testing.T) string {
	t.Helper()
	need(t)
	schemas++
	schema := fmt.Sprintf("t%d", schemas)
	setup, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	for _, q := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".acct (id int PRIMARY KEY, n int NOT NULL)",
		"INSERT INTO " + schema + ".acct VALUES (1, 0), (2, 0)",
		"CREATE SEQUENCE " + schema + ".attempts",
	} {
		if _, err := setup.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return schema
}

// connect opens a database on dsn whose connections use schema.
func connect(t *testing.T, dsn, schema string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn+"&search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// attempt draws from the attempts sequence, inside a transaction's attempt.
func attempt(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, "SELECT nextval('attempts')")
	return err
}

// attempts returns how many attempts reached the server so far.
func attempts(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM attempts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// balance returns acct row id's n.
func balance(t *testing.T, db *sql.DB, id int) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT n FROM acct WHERE id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var bg = context.Background()
