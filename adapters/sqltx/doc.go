// Package sqltx runs database/sql transactions through a Backstop pipeline: the whole
// transaction is the attempt, and only what is safe to run again is run again.
//
// # Who owns the retries
//
// database/sql retries one thing on its own: a connection the driver reports bad
// (driver.ErrBadConn) before anything was sent, redialled inside the same call; that
// never runs a statement twice, and it stays. It never retries a transaction: a
// serialization failure or a deadlock reaches the caller, whose work is lost unless
// it runs the transaction again. Wrapping the statements or a hand-written
// transaction in a generic retry goes wrong the other way: a statement retried inside
// an aborted transaction only fails again (25P02), a constraint violation is retried
// to no end, and a COMMIT whose answer was lost may have committed, so running the
// transaction again would apply it twice.
//
// [RunTx] makes the pipeline the one owner of transaction retries:
//
//	p, err := policy.Wrap(deadline.MustNew(2*time.Second), retry.MustNew(retry.Options{}), policy.Name("db"))
//	err = sqltx.RunTx(ctx, db, p, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
//		return err
//	})
//
// Each attempt begins a transaction, runs fn and commits. [Classify] decides what may
// run again: SQLSTATE 40001 (serialization_failure) and 40P01 (deadlock_detected) —
// the server rolled the transaction back — and driver.ErrBadConn — nothing was sent.
// A COMMIT that got no answer matches [ErrCommitUnknown] and is marked
// fault.Permanent: neither this retry nor one further up the call path runs it again.
// Every other SQLSTATE is Permanent too. Under a caller that already owns the call
// path, RunTx makes one attempt and leaves the decision to the owner, as any Backstop
// pipeline does. [Explain] says it in one line.
//
// What stays with database/sql and the driver: the pool, the redial of a bad
// connection, the SQL. The SQLSTATE is read from any driver error with a
// SQLState() string method (pgx's *pgconn.PgError, lib/pq's *pq.Error); the package
// imports no driver.
package sqltx
