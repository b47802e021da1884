package sqltx_test

import (
	"bytes"
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/adapters/sqltx/internal/pgserver"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/internal/lossy"
)

// A proxy in front of the server loses the answer to every COMMIT: the server
// commits, the client sees the connection break. database/sql alone returns the
// error (1 commit); a Backstop retry around a hand-written transaction that retries
// every error runs it again (3 commits: the increment applied three times); RunTx
// returns ErrCommitUnknown and runs it once.
func TestAttempts_LostCommit(t *testing.T) {
	need(t)
	proxy, err := lossy.Start(srv.Addr(), func(up []byte) bool {
		return bytes.Contains(bytes.ToLower(up), []byte("commit\x00"))
	})
	require.NoError(t, err)
	defer proxy.Close()

	increment := func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1")
		return err
	}
	for _, way := range []struct {
		name    string
		run     func(db *sql.DB) error
		commits int
	}{
		{"database/sql alone", func(db *sql.DB) error { return tx(bg, db, nil, increment) }, 1},
		{"Backstop around it, every error retried", func(db *sql.DB) error {
			return retry3().Do(bg, func(ctx context.Context) error { return fault.Retryable(tx(ctx, db, nil, increment)) })
		}, 3},
		{"sqltx.RunTx", func(db *sql.DB) error {
			err := sqltx.RunTx(bg, db, retry3(), increment)
			require.ErrorIs(t, err, sqltx.ErrCommitUnknown)
			require.True(t, fault.Of(err).Permanent, "a lost commit is Permanent: %v", err)
			return err
		}, 1},
	} {
		schema := setup(t)
		direct, proxied := connect(t, dsn, schema), connect(t, pgserver.DSN(proxy.Addr()), schema)
		require.Error(t, way.run(proxied), way.name)
		got := balance(t, direct, 1)
		t.Logf("%s: %d attempts, %d commits of one increment whose COMMIT answer was lost", way.name, attempts(t, direct), got)
		require.Equal(t, way.commits, got, "%s: commits of one increment", way.name)
		require.Equal(t, way.commits, attempts(t, direct), "%s: attempts", way.name)
	}
}
