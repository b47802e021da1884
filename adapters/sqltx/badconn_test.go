package sqltx_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/fault"
)

// terminate ends the server process behind db's one pooled connection, from another
// connection, and waits until it has ended.
func terminate(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	other, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer other.Close()
	var ok bool
	require.NoError(t, other.QueryRow("SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ok))
	require.True(t, ok, "pg_terminate_backend(%d)", pid)
}

// The server ends an idle pooled connection: the next transaction's BEGIN finds it
// bad before sending anything (driver.ErrBadConn), and database/sql redials inside
// the attempt.
func TestRunTx_ConnectionLostWhileIdle(t *testing.T) {
	db := open(t)
	db.SetMaxOpenConns(1)
	var pid int
	require.NoError(t, db.QueryRow("SELECT pg_backend_pid()").Scan(&pid))
	terminate(t, db, pid)
	err := sqltx.RunTx(bg, db, retry3(), func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, attempts(t, db))
	require.Equal(t, 1, balance(t, db, 1))
}

// The server ends the connection in the middle of a transaction (SQLSTATE 57P01): the
// transaction is rolled back, and RunTx, which retries only 40001, 40P01 and
// driver.ErrBadConn, returns the error after one attempt.
func TestRunTx_ConnectionLostInTransaction(t *testing.T) {
	db := open(t)
	db.SetMaxOpenConns(1)
	first := true
	err := sqltx.RunTx(bg, db, retry3(), func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		if first {
			first = false
			var pid int
			require.NoError(t, tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))
			terminate(t, db, pid)
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1")
		return err
	})
	require.Equal(t, "57P01", sqltx.SQLState(err), "the transaction's error: %v", err)
	require.False(t, fault.Of(err).Permanent, "nothing committed: a retry owner further up may run it again")
	require.Equal(t, 1, attempts(t, db))
	require.Equal(t, 0, balance(t, db, 1), "rolled back")
}
