package sqltx_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/fault"
)

// Toxiproxy loses the answer to every COMMIT (reset_peer on the server's answers,
// armed as fn ends): the server commits, the client sees the connection break.
// database/sql alone returns the error (1 commit); a Backstop retry around a
// hand-written transaction that retries every error runs it again (3 commits: the
// increment applied three times); RunTx returns ErrCommitUnknown and runs it once;
// Ledger.RunTx finds it committed and returns nil.
func TestAttempts_LostCommit(t *testing.T) {
	f := startFaults(t)
	for _, way := range []struct {
		name    string
		run     func(db *sql.DB, fn func(context.Context, *sql.Tx) error) error
		commits int
		ok      bool
	}{
		{"database/sql alone", func(db *sql.DB, fn func(context.Context, *sql.Tx) error) error { return tx(bg, db, nil, fn) }, 1, false},
		{"Backstop around it, every error retried", func(db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
			return retry3().Do(bg, func(ctx context.Context) error { return fault.Retryable(tx(ctx, db, nil, fn)) })
		}, 3, false},
		{"sqltx.RunTx", func(db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
			err := sqltx.RunTx(bg, db, retry3(), fn)
			require.ErrorIs(t, err, sqltx.ErrCommitUnknown)
			require.True(t, fault.Of(err).Permanent, "a lost commit is Permanent: %v", err)
			return err
		}, 1, false},
		{"sqltx.Ledger.RunTx", func(db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
			require.NoError(t, sqltx.Ledger{}.Create(bg, db))
			return sqltx.Ledger{}.RunTx(bg, db, retry3(), nil, fn)
		}, 1, true},
	} {
		schema := setup(t)
		direct, proxied := connect(t, dsn, schema), f.open(t, schema)
		err := way.run(proxied, func(ctx context.Context, tx *sql.Tx) error {
			if err := attempt(ctx, tx); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1"); err != nil {
				return err
			}
			f.arm(t, "reset_peer", "downstream") // COMMIT's answer is lost
			return nil
		})
		f.heal()
		if way.ok {
			require.NoError(t, err, way.name)
		} else {
			require.Error(t, err, way.name)
		}
		got := balance(t, direct, 1)
		t.Logf("%s: %d attempts, %d commits of one increment whose COMMIT answer was lost", way.name, attempts(t, direct), got)
		require.Equal(t, way.commits, got, "%s: commits of one increment", way.name)
		require.Equal(t, way.commits, attempts(t, direct), "%s: attempts", way.name)
	}
}
