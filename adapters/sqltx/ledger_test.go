package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The network stays down after a COMMIT got no answer (timeout toxics, held): the
// ledger cannot be read, and the call ends with the transaction's token. Once the
// network is back, Resolve tells what happened — committed when the answer was
// dropped, not when the request was — and says it again when asked again.
func TestLedger_ResolveLater(t *testing.T) {
	f := startFaults(t)
	for _, tc := range []struct {
		stream    string
		committed bool
	}{{"downstream", true}, {"upstream", false}} {
		schema := setup(t)
		direct, db := connect(t, dsn, schema), f.open(t, schema)
		ledger := sqltx.Ledger{ResolveTimeout: 200 * time.Millisecond}
		require.NoError(t, ledger.Create(bg, db))
		p := policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Cap: time.Millisecond})),
			policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 200 * time.Millisecond}))))
		f.hold(true)
		err := ledger.RunTx(bg, db, p, nil, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1"); err != nil {
				return err
			}
			f.arm(t, "timeout", tc.stream)
			return nil
		})
		var cu *sqltx.CommitUnknownError
		require.ErrorAs(t, err, &cu, "COMMIT's %s dropped, the network down", tc.stream)
		require.ErrorIs(t, err, sqltx.ErrCommitUnknown)
		require.True(t, fault.Of(err).Permanent, "%v", err)
		require.NotEmpty(t, cu.Token, "%v", err)

		f.hold(false)
		f.heal()
		for range 2 {
			committed, err := ledger.Resolve(bg, db, cu.Token)
			require.NoError(t, err, "Resolve")
			require.Equal(t, tc.committed, committed, "Resolve, COMMIT's %s dropped", tc.stream)
		}
		require.Equal(t, map[bool]int{true: 1, false: 0}[tc.committed], balance(t, direct, 1), "COMMIT's %s dropped", tc.stream)
	}
}

func TestLedger_RefusesBadArguments(t *testing.T) {
	db := open(t)
	fn := func(context.Context, *sql.Tx) error { return nil }
	bad := sqltx.Ledger{Table: "t; DROP TABLE acct"}
	for name, err := range map[string]error{
		"Create, bad table": bad.Create(bg, db),
		"RunTx, bad table":  bad.RunTx(bg, db, retry3(), nil, fn),
		"Resolve, bad token": func() error {
			_, err := sqltx.Ledger{}.Resolve(bg, db, "x' OR true --")
			return err
		}(),
	} {
		require.ErrorIs(t, err, sqltx.ErrInvalidArgument, name)
	}
}

// Prune deletes the rows written before a time, and keeps the others.
func TestLedger_Prune(t *testing.T) {
	db := open(t)
	ledger := sqltx.Ledger{Table: "ledger"}
	require.NoError(t, ledger.Create(bg, db))
	for range 3 {
		require.NoError(t, ledger.RunTx(bg, db, retry3(), nil, attempt))
	}
	n, err := ledger.Prune(bg, db, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "rows pruned an hour back")
	var now time.Time
	require.NoError(t, db.QueryRow("SELECT now()").Scan(&now))
	n, err = ledger.Prune(bg, db, now)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "rows pruned up to the server's now")
}

// A read-only transaction writes nothing to the ledger: it runs as RunTxWith runs it.
func TestLedger_ReadOnly(t *testing.T) {
	db := open(t)
	ledger := sqltx.Ledger{}
	require.NoError(t, ledger.Create(bg, db))
	err := ledger.RunTx(bg, db, retry3(), &sql.TxOptions{ReadOnly: true}, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		return tx.QueryRowContext(ctx, "SELECT n FROM acct WHERE id = 1").Scan(&n)
	})
	require.NoError(t, err)
	var rows int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM "+sqltx.DefaultLedgerTable).Scan(&rows))
	require.Zero(t, rows)
	require.False(t, errors.Is(err, sqltx.ErrCommitUnknown))
}
