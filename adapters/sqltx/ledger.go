package sqltx

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/policy"
)

// Defaults of a [Ledger].
const (
	DefaultLedgerTable    = "backstop_ledger"
	DefaultResolveTimeout = 5 * time.Second
)

// A Ledger resolves the COMMITs that got no answer. Each transaction run by
// [Ledger.RunTx] first writes a row to the ledger's table under a token of its own,
// so the row commits if and only if the transaction does. When COMMIT gets no
// answer, RunTx asks the ledger on another connection ([Ledger.Resolve]). A
// committed transaction is a success. One that did not commit is fenced (it never
// can) and is retried like any transaction that rolled back. Only when the ledger
// cannot be read does the call end with a *[CommitUnknownError] carrying the token,
// to resolve later.
//
// The ledger speaks PostgreSQL (INSERT … ON CONFLICT). Create its table once with
// [Ledger.Create]; [Ledger.Prune] deletes old rows. The zero value uses
// DefaultLedgerTable. A Ledger is a value, safe for concurrent use.
type Ledger struct {
	// Table is the ledger's table, possibly schema-qualified: letters, digits, '_'
	// and '.'. "" means DefaultLedgerTable.
	Table string
	// ResolveTimeout bounds the resolution of one COMMIT without an answer. It runs
	// even when the attempt's context has ended. Zero means DefaultResolveTimeout.
	ResolveTimeout time.Duration
}

func (l *Ledger) table() (string, error) {
	if l.Table == "" {
		return DefaultLedgerTable, nil
	}
	for _, c := range l.Table {
		if !(c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return "", fmt.Errorf("%w: ledger table %q; want letters, digits, '_' and '.'", ErrInvalidArgument, l.Table)
		}
	}
	return l.Table, nil
}

// Create creates the ledger's table if it does not exist.
func (l Ledger) Create(ctx context.Context, db *sql.DB) error {
	t, err := l.table()
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+t+
		" (token text PRIMARY KEY, committed boolean NOT NULL, at timestamptz NOT NULL DEFAULT now())")
	return err
}

// RunTx is [RunTxWith], each attempt recorded in the ledger: a COMMIT without an
// answer is resolved before the attempt ends. A read-only transaction (opts.ReadOnly)
// writes nothing, and runs as RunTxWith runs it.
func (l Ledger) RunTx(ctx context.Context, db *sql.DB, p *policy.Pipeline, opts *sql.TxOptions, fn func(context.Context, *sql.Tx) error) error {
	if _, err := l.table(); err != nil {
		return err
	}
	if opts != nil && opts.ReadOnly {
		return run(ctx, db, p, opts, fn, nil)
	}
	return run(ctx, db, p, opts, fn, &l)
}

// Resolve tells whether the transaction recorded under token committed. When it
// did not, Resolve records the token as not committed first: the transaction can
// never commit after it. A transaction still running on a connection the client
// lost holds its row: Resolve waits for it to end, until ctx does. Resolving a
// token again gives the same answer.
func (l Ledger) Resolve(ctx context.Context, db *sql.DB, token string) (committed bool, err error) {
	t, err := l.table()
	if err != nil {
		return false, err
	}
	if !validToken(token) {
		return false, fmt.Errorf("%w: ledger token %q; want 32 lowercase hex digits", ErrInvalidArgument, token)
	}
	res, err := db.ExecContext(ctx, "INSERT INTO "+t+" (token, committed) VALUES ('"+token+"', false) ON CONFLICT (token) DO NOTHING")
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return false, err // fenced: it did not commit, and now never will
	}
	err = db.QueryRowContext(ctx, "SELECT committed FROM "+t+" WHERE token = '"+token+"'").Scan(&committed)
	return committed, err
}

// Prune deletes the ledger's rows written before before. A token must be kept as
// long as its transaction may be resolved.
func (l Ledger) Prune(ctx context.Context, db *sql.DB, before time.Time) (int64, error) {
	t, err := l.table()
	if err != nil {
		return 0, err
	}
	res, err := db.ExecContext(ctx, "DELETE FROM "+t+" WHERE at < $1", before)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// record returns the statement that writes token to the ledger, as committed.
func (l *Ledger) record(token string) string {
	t, _ := l.table() // checked by RunTx
	return "INSERT INTO " + t + " (token, committed) VALUES ('" + token + "', true)"
}

// settle resolves the transaction recorded under token, whose COMMIT ended with
// unknown (a *CommitUnknownError): nil if it committed, a retryable error if it did
// not, unknown with the token if the ledger could not say.
func (l *Ledger) settle(ctx context.Context, db *sql.DB, token string, unknown error) error {
	var cu *CommitUnknownError
	errors.As(unknown, &cu)
	timeout := l.ResolveTimeout
	if timeout <= 0 {
		timeout = DefaultResolveTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	committed, err := l.Resolve(rctx, db, token)
	switch {
	case err != nil:
		return fault.Permanent(&CommitUnknownError{Token: token, Err: fmt.Errorf("%w; resolving it: %w", cu.Err, err)})
	case committed:
		return nil
	}
	return fault.Retryable(fmt.Errorf("sqltx: the ledger says the transaction did not commit: %w", cu.Err))
}

// newToken returns a new ledger token: 128 random bits in hex.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// validToken reports whether s is a token newToken could return: only such a token
// is written into a statement.
func validToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
