package sqltx_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

func retry3() *policy.Pipeline {
	return policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Cap: time.Millisecond})),
		policy.Name("db")))
}

// retryMany leaves room for conflicts that happen again: two transactions that both
// failed retry at once, and may collide once more before one of them wins.
func retryMany() *policy.Pipeline {
	return policy.Must(policy.Wrap(policy.Must(retry.New(retry.Options{MaxAttempts: 10, Base: time.Millisecond, Cap: 20 * time.Millisecond}))))
}

var repeatableRead = &sql.TxOptions{Isolation: sql.LevelRepeatableRead}

// conflicted runs an increment of row 1 through run, in a REPEATABLE READ transaction
// that, on its first attempt only, reads row 1 and then lets another transaction
// increment and commit it before writing: that attempt fails with SQLSTATE 40001
// (could not serialize access due to concurrent update).
func conflicted(t *testing.T, db *sql.DB, run func(fn func(context.Context, *sql.Tx) error) error) error {
	t.Helper()
	first := true
	return run(func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT n FROM acct WHERE id = 1").Scan(&n); err != nil {
			return err // the snapshot is taken
		}
		if first {
			first = false
			_, err := db.Exec("UPDATE acct SET n = n + 1 WHERE id = 1") // commits at once
			require.NoError(t, err, "the concurrent transaction")
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1")
		return err
	})
}

func TestRunTx_SerializationFailureRetried(t *testing.T) {
	db := open(t)
	err := conflicted(t, db, func(fn func(context.Context, *sql.Tx) error) error {
		return sqltx.RunTxWith(bg, db, retry3(), repeatableRead, fn)
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts(t, db), "attempts: the conflicted one and its retry")
	require.Equal(t, 2, balance(t, db, 1), "both increments applied")
}

// Two SERIALIZABLE transactions each read both rows and then write one (write skew):
// PostgreSQL lets the first to commit win and fails the other with 40001, which
// RunTx runs again.
func TestRunTx_WriteSkewRetried(t *testing.T) {
	db := open(t)
	var barrier sync.WaitGroup
	barrier.Add(2)
	run := func(id int) error {
		first := true
		return sqltx.RunTxWith(bg, db, retryMany(), &sql.TxOptions{Isolation: sql.LevelSerializable}, func(ctx context.Context, tx *sql.Tx) error {
			if err := attempt(ctx, tx); err != nil {
				return err
			}
			var sum int
			if err := tx.QueryRowContext(ctx, "SELECT sum(n) FROM acct").Scan(&sum); err != nil {
				return err
			}
			if first { // both have read before either writes
				first = false
				barrier.Done()
				barrier.Wait()
			}
			_, err := tx.ExecContext(ctx, "UPDATE acct SET n = $1 WHERE id = $2", sum+1, id)
			return err
		})
	}
	errs := make(chan error, 2)
	for id := 1; id <= 2; id++ {
		go func() { errs <- run(id) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	// Two first attempts and at least one retry: mostly exactly one, more when
	// PostgreSQL ends both, or their retries collide again.
	n := attempts(t, db)
	require.GreaterOrEqual(t, n, 3, "attempts")
	t.Logf("attempts: %d", n)
	// As if run one after the other: the first wrote 0+1, the second read 1, wrote 2.
	require.Equal(t, 3, balance(t, db, 1)+balance(t, db, 2))
}

// Two transactions lock rows 1 and 2 in opposite orders: PostgreSQL ends one with
// 40P01 after deadlock_timeout, and RunTx runs it again once the other commits.
func TestRunTx_DeadlockRetried(t *testing.T) {
	db := open(t)
	var barrier sync.WaitGroup
	barrier.Add(2)
	run := func(a, b int) error {
		first := true
		return sqltx.RunTx(bg, db, retryMany(), func(ctx context.Context, tx *sql.Tx) error {
			if err := attempt(ctx, tx); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = $1", a); err != nil {
				return err
			}
			if first { // each holds its first row before it asks for the other's
				first = false
				barrier.Done()
				barrier.Wait()
			}
			_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = $1", b)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(1, 2) }()
	go func() { errs <- run(2, 1) }()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	// Two first attempts, and a retry for each one PostgreSQL ended: one mostly; both
	// now and then, when each detects the cycle before the other's end breaks it, and
	// their retries may deadlock again.
	n := attempts(t, db)
	require.GreaterOrEqual(t, n, 3, "attempts")
	t.Logf("attempts: %d", n)
	require.Equal(t, 2, balance(t, db, 1), "each increment applied once")
	require.Equal(t, 2, balance(t, db, 2), "each increment applied once")
}

func TestRunTx_ConstraintNotRetried(t *testing.T) {
	db := open(t)
	err := sqltx.RunTx(bg, db, retry3(), func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO acct VALUES (1, 5)")
		return err
	})
	require.Equal(t, "23505", sqltx.SQLState(err), "duplicate key: %v", err)
	require.True(t, fault.Of(err).Permanent, "a constraint's error is marked Permanent: %v", err)
	require.Equal(t, 1, attempts(t, db))
	require.Equal(t, 0, balance(t, db, 1), "rolled back")
}

// Under a caller that owns the call path, RunTx's retry makes one attempt; the owner
// decides, and retries the serialization failure itself.
func TestRunTx_UnderAnOwner(t *testing.T) {
	db := open(t)
	owner := retry3()
	err := conflicted(t, db, func(fn func(context.Context, *sql.Tx) error) error {
		return owner.Do(bg, func(ctx context.Context) error {
			return sqltx.RunTxWith(ctx, db, retry3(), repeatableRead, fn)
		})
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts(t, db), "attempts: one per owner's attempt")
}

func TestRunTx_RefusesNil(t *testing.T) {
	db := open(t)
	fn := func(context.Context, *sql.Tx) error { return nil }
	for name, err := range map[string]error{
		"db":       sqltx.RunTx(bg, nil, retry3(), fn),
		"pipeline": sqltx.RunTx(bg, db, nil, fn),
		"fn":       sqltx.RunTx(bg, db, retry3(), nil),
	} {
		require.ErrorIs(t, err, sqltx.ErrInvalidArgument, "RunTx with a nil %s", name)
	}
}

// A hedge never runs a second transaction beside the first: the first waits on a row
// another transaction holds until the deadline, and is the only attempt.
func TestRunTx_NeverHedged(t *testing.T) {
	db := open(t)
	blocker, err := db.Begin()
	require.NoError(t, err)
	defer blocker.Rollback()
	_, err = blocker.Exec("UPDATE acct SET n = n + 1 WHERE id = 1")
	require.NoError(t, err)

	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 200 * time.Millisecond})),
		policy.Must(retry.NewHedge(retry.HedgeOptions{MaxAttempts: 3, Delay: time.Millisecond}))))
	err = sqltx.RunTx(bg, db, p, func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1") // waits on the blocker
		return err
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, attempts(t, db))
}

// TestRunTx_ACommitTheServerRolledBackIsNoUnknownCommit: fn swallows a statement's
// error, so PostgreSQL answers COMMIT with ROLLBACK: nothing committed, and the error
// says so — not ErrCommitUnknown, not Permanent; not retried either (the same run
// would fail the same way).
func TestRunTx_ACommitTheServerRolledBackIsNoUnknownCommit(t *testing.T) {
	db := open(t)
	err := sqltx.RunTx(bg, db, retry3(), func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		_, _ = tx.ExecContext(ctx, "SELECT 1/0") // fails; the transaction is aborted
		return nil
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, sqltx.ErrCommitUnknown, "%v", err)
	require.False(t, fault.Of(err).Permanent, "%v", err)
	require.Equal(t, 1, attempts(t, db))
	require.Equal(t, 0, balance(t, db, 1), "rolled back")
}

// TestRunTx_AContextEndedBeforeCommitIsNoUnknownCommit: the attempt's context ends
// after fn and before COMMIT: the transaction is rolled back, and the error is the
// context's, not ErrCommitUnknown.
func TestRunTx_AContextEndedBeforeCommitIsNoUnknownCommit(t *testing.T) {
	db := open(t)
	ctx, cancel := context.WithCancel(bg)
	err := sqltx.RunTx(ctx, db, retry3(), func(ctx context.Context, tx *sql.Tx) error {
		if err := attempt(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1")
		cancel()
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, sqltx.ErrCommitUnknown, "%v", err)
	require.Equal(t, 0, balance(t, db, 1), "rolled back")
}
