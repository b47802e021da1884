package sqltx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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
	// pipeline or function, and of a [Ledger] with a bad table name or token; the
	// error names it.
	ErrInvalidArgument = errors.New("sqltx: invalid argument")
	// ErrCommitUnknown is matched by the error of a transaction whose COMMIT got no
	// answer (the connection broke, the context ended): it may have committed. The
	// error is a *[CommitUnknownError] marked fault.Permanent, so no retry, here or
	// further up, runs it again. A [Ledger] resolves it.
	ErrCommitUnknown = errors.New("sqltx: the commit may have succeeded")
)

// A CommitUnknownError is the error of a transaction whose COMMIT was sent and got
// no answer. It matches [ErrCommitUnknown] and unwraps to COMMIT's error.
type CommitUnknownError struct {
	// Token is the transaction's token in its [Ledger]: [Ledger.Resolve] tells
	// whether it committed. It is "" for a transaction run without a ledger.
	Token string
	// Err is COMMIT's error, and the resolution's when one failed.
	Err error
}

func (e *CommitUnknownError) Error() string {
	if e.Token == "" {
		return ErrCommitUnknown.Error() + ": " + e.Err.Error()
	}
	return ErrCommitUnknown.Error() + " (ledger token " + e.Token + "): " + e.Err.Error()
}

// Unwrap returns COMMIT's error.
func (e *CommitUnknownError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCommitUnknown.
func (e *CommitUnknownError) Is(target error) bool { return target == ErrCommitUnknown }

// RunTx runs fn in a transaction of db through p: each attempt begins a transaction,
// calls fn, and commits if fn returns nil or rolls back if it returns an error. An
// attempt's error is classified by [Classify]: the pipeline's retry runs the whole
// transaction again after a serialization failure, a deadlock or a connection lost
// before COMMIT was sent (nothing committed), and never after a COMMIT that got no
// answer: that error matches [ErrCommitUnknown]. [Ledger.RunTx] resolves it.
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
	return run(ctx, db, p, opts, fn, nil)
}

// run runs fn's transaction through p, each attempt recorded in l unless l is nil.
func run(ctx context.Context, db *sql.DB, p *policy.Pipeline, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error, l *Ledger) error {
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
		var token string
		if l != nil {
			token = newToken()
		}
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return classify(ctx, err)
		}
		if l != nil {
			if _, err := tx.ExecContext(ctx, l.record(token)); err != nil {
				_ = tx.Rollback()
				return classify(ctx, err)
			}
		}
		if err := fn(ctx, tx); err != nil {
			_ = tx.Rollback()
			return classify(ctx, err)
		}
		if err := ctx.Err(); err != nil {
			// The attempt's context ended before COMMIT was sent: database/sql rolls
			// the transaction back and would answer Commit with that error, which
			// says nothing of a commit that never began.
			_ = tx.Rollback()
			return classify(ctx, err)
		}
		err = Classify(tx.Commit(), true)
		if l == nil || !errors.Is(err, ErrCommitUnknown) {
			return err
		}
		return l.settle(ctx, db, token, err)
	})
}

// classify is [Classify] of an error from before COMMIT was sent, left as it is once
// the attempt's context has ended: the retry's classifier then decides (a
// per-attempt timeout is retried, the caller's deadline or cancellation is not).
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	return Classify(err, false)
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
//   - driver.ErrBadConn, or a pgx error whose SafeToRetry() is true: fault.Retryable —
//     the driver says so only when nothing was sent (database/sql already retried it
//     on a new connection where it could).
//   - Before COMMIT, a connection lost without a SQLSTATE (pgx's "conn closed",
//     io.ErrUnexpectedEOF, io.EOF, a reset, any *net.OpError but a timeout):
//     fault.Retryable — no COMMIT was sent, so the server rolls the transaction back.
//   - At COMMIT, pgx's "commit unexpectedly resulted in rollback" (the server answered
//     ROLLBACK: an earlier statement failed): left as it is — nothing committed.
//   - At COMMIT, any other error without a SQLSTATE: it may have committed. The error
//     is a *[CommitUnknownError], matches ErrCommitUnknown and is marked
//     fault.Permanent.
//   - Before COMMIT, a SQLSTATE that says the server or the connection went away
//     (class 08, 57P01–57P03, 53300): left as it is — not retried here (the
//     transaction was cut, and may have been cut on purpose), but a retry owner
//     further up may run it again: nothing committed.
//   - At COMMIT, any other SQLSTATE: the server answered and rolled back; marked
//     fault.Permanent, as is every other SQLSTATE (a constraint, a syntax error: running
//     the transaction again would fail again).
//   - Anything else, before COMMIT (a timeout, the context's end, fn's own error):
//     left as it is, for the retry's classifier.
func Classify(err error, committing bool) error {
	if err == nil {
		return nil
	}
	state := SQLState(err)
	switch {
	case state == SerializationFailure || state == DeadlockDetected:
		return fault.Retryable(err)
	case errors.Is(err, driver.ErrBadConn) || nothingSent(err):
		return fault.Retryable(err)
	case !committing && state == "" && connectionLost(err):
		return fault.Retryable(err)
	case committing && state == "" && rolledBack(err):
		return err // the server answered COMMIT with ROLLBACK: nothing committed
	case committing && state == "":
		return fault.Permanent(&CommitUnknownError{Err: err})
	case state != "" && !committing && serverGone(state):
		return err // nothing committed; the server went, not the transaction's fault
	case state != "":
		return fault.Permanent(err)
	}
	return err
}

// nothingSent reports whether the driver says err came before anything was sent:
// pgx's errors have a SafeToRetry() bool method.
func nothingSent(err error) bool {
	var s interface{ SafeToRetry() bool }
	return errors.As(err, &s) && s.SafeToRetry()
}

// connectionLost reports whether err says the connection broke: the end of its
// stream, a reset, a closed socket, a failed network operation other than a
// timeout, or pgx's "conn closed" (pgconn.ErrConnClosed, known by its text, as
// this package imports no driver).
func connectionLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	var op *net.OpError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &op):
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "conn closed" {
			return true
		}
	}
	return false
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
	return fmt.Sprintf("database/sql: at most %d runs of a transaction, each whole, on SQLSTATE %s or %s, driver.ErrBadConn or a connection lost before COMMIT; never after a COMMIT without an answer, unless a Ledger says it did not commit (database/sql itself redials a connection that failed before anything was sent, inside an attempt)",
		p.Explain().MaxAttempts, SerializationFailure, DeadlockDetected)
}
