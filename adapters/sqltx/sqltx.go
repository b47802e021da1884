package sqltx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-go/backstop/callpath"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// The SQLSTATEs [RunTx] retries: the server rolled the transaction back, and running
// it again may succeed.
const (
	SerializationFailure = "40001" // serialization_failure: a concurrent transaction won
	DeadlockDetected     = "40P01" // deadlock_detected: this transaction was chosen to end the deadlock
)

var (
	// ErrInvalidArgument is matched by the error of RunTx called with a nil database,
	// pipeline or function; the error names it.
	ErrInvalidArgument = errors.New("sqltx: invalid argument")
	// ErrCommitUnknown is matched by the error of a transaction whose COMMIT got no
	// answer (the connection broke, the context ended): it may have committed. The
	// error is marked fault.Permanent, so no retry, here or further up, runs it again.
	ErrCommitUnknown = errors.New("sqltx: the commit may have succeeded")
)

// RunTx runs fn in a transaction of db through p: each attempt begins a transaction,
// calls fn, and commits if fn returns nil or rolls back if it returns an error. An
// attempt's error is classified by [Classify]: the pipeline's retry runs the whole
// transaction again after a serialization failure, a deadlock or a connection that
// broke before anything was sent (driver.ErrBadConn), and never after a COMMIT that
// got no answer.
//
// fn gets the attempt's context and the transaction, to which both are bound: a
// per-attempt timeout, an overall deadline or the caller's cancellation rolls the
// transaction back and cancels the statement in flight, if fn runs its statements
// with that context (ExecContext, QueryContext; database/sql cannot cancel a
// statement run without one, and a transaction waiting on a lock would wait on past
// every deadline). fn may run more than once: it must do its work through tx only,
// and keep no state across calls that the transaction does not (read what you need
// inside it). A hedge (retry.NewHedge) in p makes no second attempt while the first
// runs: the call is marked callpath.WithoutRepeats.
func RunTx(ctx context.Context, db *sql.DB, p *policy.Pipeline, fn func(context.Context, *sql.Tx) error) error {
	return RunTxWith(ctx, db, p, nil, fn)
}

// RunTxWith is [RunTx] with the options of each transaction (its isolation level,
// read-only); nil means the driver's defaults.
func RunTxWith(ctx context.Context, db *sql.DB, p *policy.Pipeline, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
	switch {
	case db == nil:
		return fmt.Errorf("%w: the database is nil", ErrInvalidArgument)
	case p == nil:
		return fmt.Errorf("%w: the pipeline is nil; want one built with policy.Wrap", ErrInvalidArgument)
	case fn == nil:
		return fmt.Errorf("%w: the transaction's function is nil", ErrInvalidArgument)
	}
	// Never hedged: a hedge's second transaction would do the work again, at once.
	ctx = callpath.WithoutRepeats(ctx)
	return p.Do(ctx, func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return Classify(err, false)
		}
		if err := fn(ctx, tx); err != nil {
			_ = tx.Rollback()
			return Classify(err, false)
		}
		if err := ctx.Err(); err != nil {
			// The attempt's context ended before COMMIT was sent: database/sql rolls
			// the transaction back and would answer Commit with that error, which
			// says nothing of a commit that never began.
			_ = tx.Rollback()
			return Classify(err, false)
		}
		return Classify(tx.Commit(), true)
	})
}

// SQLState returns the SQLSTATE code err carries, as the drivers' error types say it
// (pgx's *pgconn.PgError, lib/pq's *pq.Error: a SQLState() string method), or "".
func SQLState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

// Classify marks err, from one attempt of a transaction, with what it means for a
// retry; committing says whether it came from COMMIT. nil stays nil.
//
//   - SQLSTATE 40001 or 40P01: fault.Retryable — the server rolled the transaction
//     back.
//   - driver.ErrBadConn: fault.Retryable — the driver says so only when nothing was
//     sent (database/sql already retried it on a new connection where it could).
//   - At COMMIT, pgx's "commit unexpectedly resulted in rollback" (the server answered
//     ROLLBACK: an earlier statement failed): left as it is — nothing committed.
//   - At COMMIT, any other error without a SQLSTATE: it may have committed. The error
//     matches ErrCommitUnknown and is marked fault.Permanent.
//   - Before COMMIT, a SQLSTATE that says the server or the connection went away
//     (class 08, 57P01–57P03, 53300): left as it is — not retried here (the
//     transaction was cut, and may have been cut on purpose), but a retry owner
//     further up may run it again: nothing committed.
//   - At COMMIT, any other SQLSTATE: the server answered and rolled back; marked
//     fault.Permanent, as is every other SQLSTATE (a constraint, a syntax error: running
//     the transaction again would fail again).
//   - Anything else, before COMMIT: left as it is, for the retry's classifier — the
//     transaction did not commit, so a timeout or a reset connection may be retried.
func Classify(err error, committing bool) error {
	if err == nil {
		return nil
	}
	state := SQLState(err)
	switch {
	case state == SerializationFailure || state == DeadlockDetected:
		return fault.Retryable(err)
	case errors.Is(err, driver.ErrBadConn):
		return fault.Retryable(err)
	case committing && state == "" && rolledBack(err):
		return err // the server answered COMMIT with ROLLBACK: nothing committed
	case committing && state == "":
		return fault.Permanent(fmt.Errorf("%w: %w", ErrCommitUnknown, err))
	case state != "" && !committing && serverGone(state):
		return err // nothing committed; the server went, not the transaction's fault
	case state != "":
		return fault.Permanent(err)
	}
	return err
}

// serverGone reports whether a SQLSTATE says that the server or the connection went
// away, not that the transaction was wrong: class 08 (connection exception), 57P01–
// 57P03 (admin or crash shutdown, cannot connect now), 53300 (too many connections).
func serverGone(state string) bool {
	return strings.HasPrefix(state, "08") || state == "57P01" || state == "57P02" || state == "57P03" || state == "53300"
}

// rolledBack reports whether err says that the server answered COMMIT with ROLLBACK
// (an earlier statement of the transaction failed and fn went on): pgx returns
// pgx.ErrTxCommitRollback, which exports no type this package could match without
// importing the driver, so it is known by its text.
func rolledBack(err error) bool {
	return strings.Contains(err.Error(), "commit unexpectedly resulted in rollback")
}

// Explain says, in one line, what [RunTx] does through p: how many times a
// transaction may run, and on which errors.
func Explain(p *policy.Pipeline) string {
	return fmt.Sprintf("database/sql: at most %d runs of a transaction, each whole, on SQLSTATE %s or %s or driver.ErrBadConn; never after a COMMIT without an answer (database/sql itself redials a connection that failed before anything was sent, inside an attempt)",
		p.Explain().MaxAttempts, SerializationFailure, DeadlockDetected)
}
