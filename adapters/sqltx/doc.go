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
//	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(retry.New(retry.Options{})), policy.Name("db"))
//	err = sqltx.RunTx(ctx, db, p, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
//		return err
//	})
//
// Each attempt begins a transaction, runs fn and commits. [Classify] decides what may
// run again: SQLSTATE 40001 (serialization_failure) and 40P01 (deadlock_detected) —
// the server rolled the transaction back — driver.ErrBadConn — nothing was sent — and
// a connection lost before COMMIT was sent (pgx's "conn closed", an unexpected EOF, a
// reset): the server rolls back a transaction whose connection is gone. A COMMIT
// that got no answer matches [ErrCommitUnknown] and is marked fault.Permanent:
// neither this retry nor one further up the call path runs it again. Every other
// SQLSTATE is Permanent too. Under a caller that already owns the call path, RunTx
// makes one attempt and leaves the decision to the owner, as any Backstop pipeline
// does. [Explain] says it in one line.
//
// # Commits without an answer
//
// When the connection breaks after COMMIT was sent, the transaction committed if the
// answer was lost, and did not if the request was; the client cannot tell which. A
// [Ledger] can. Each transaction [Ledger.RunTx] runs first writes a row to the
// ledger's table under a token of its own, so the row commits with the transaction
// and only with it. After a COMMIT without an answer, RunTx asks the ledger on a new
// connection: committed is a success; not committed is fenced, so it never can, and
// the transaction runs again. Fencing is an insert of the same token: the primary
// key makes it wait for a transaction still running on the lost connection, so the
// answer cannot change afterwards. When the ledger cannot be read, the error is a
// *[CommitUnknownError] with the token, and [Ledger.Resolve] answers later:
//
//	ledger := sqltx.Ledger{} // table backstop_ledger
//	if err := ledger.Create(ctx, db); err != nil {
//		return false, err
//	}
//	err := ledger.RunTx(ctx, db, p, nil, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
//		return err
//	})
//	var unknown *sqltx.CommitUnknownError
//	if errors.As(err, &unknown) { // the ledger could not be read: ask again later
//		committed, err := ledger.Resolve(ctx, db, unknown.Token)
//		return committed, err
//	}
//
// PostgreSQL's pg_xact_status(xid8) also tells a transaction's fate from its id, but
// the id must be read before COMMIT (a round trip, as the ledger's insert), and it
// answers "in progress" until the server notices the lost connection, so a resolver
// would poll, and could not stop that transaction from committing later. The ledger
// costs one row per transaction: [Ledger.Prune] deletes the old ones.
//
// What stays with database/sql and the driver: the pool, the redial of a bad
// connection, the SQL. The SQLSTATE is read from any driver error with a
// SQLState() string method (pgx's *pgconn.PgError, lib/pq's *pq.Error); the package
// imports no driver.
package sqltx
