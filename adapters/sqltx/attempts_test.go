package sqltx_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/fault"
)

// tx is a transaction written by hand: begin, fn, commit or roll back.
func tx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// duplicate inserts a row that exists: SQLSTATE 23505, whatever the attempt.
func duplicate(ctx context.Context, tx *sql.Tx) error {
	if err := attempt(ctx, tx); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO acct VALUES (1, 5)")
	return err
}

// The same transactions three ways, attempts counted on the server: database/sql and
// pgx alone (no retry of a transaction: the conflicted one is lost), a Backstop retry
// around a hand-written transaction that retries every error (the duplicate runs 3
// times, and so would a COMMIT that may have succeeded), and RunTx.
func TestAttempts_ThreeWays(t *testing.T) {
	type result struct{ conflict, dup int }
	var got [3]result
	for i, way := range []struct {
		name string
		run  func(db *sql.DB, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error
	}{
		{"database/sql alone", func(db *sql.DB, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
			return tx(bg, db, opts, fn)
		}},
		{"Backstop around it, every error retried", func(db *sql.DB, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
			return retry3().Do(bg, func(ctx context.Context) error { return fault.Retryable(tx(ctx, db, opts, fn)) })
		}},
		{"sqltx.RunTx", func(db *sql.DB, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
			return sqltx.RunTxWith(bg, db, retry3(), opts, fn)
		}},
	} {
		db := open(t)
		err := conflicted(t, db, func(fn func(context.Context, *sql.Tx) error) error { return way.run(db, repeatableRead, fn) })
		got[i].conflict = attempts(t, db)
		if i == 0 {
			require.Equal(t, sqltx.SerializationFailure, sqltx.SQLState(err), "%s, conflicted: %v", way.name, err)
		} else {
			require.NoError(t, err, "%s, conflicted", way.name)
		}
		err = way.run(db, nil, duplicate)
		require.Equal(t, "23505", sqltx.SQLState(err), "%s, duplicate: %v", way.name, err)
		got[i].dup = attempts(t, db) - got[i].conflict
		t.Logf("%s: %d attempts of the conflicted transaction, %d of the duplicate insert", way.name, got[i].conflict, got[i].dup)
	}
	require.Equal(t, [3]result{{1, 1}, {2, 3}, {2, 1}}, got, "attempts {conflicted, duplicate}: alone, naive, RunTx")
}
