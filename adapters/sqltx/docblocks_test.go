package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(ctx context.Context, db *sql.DB) error {
	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 2 * time.Second})), policy.Must(retry.New(retry.Options{})), policy.Name("db"))
	if err != nil {
		return err
	}
	err = sqltx.RunTx(ctx, db, p, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
		return err
	})
	return err
}

// The ledger's wiring the package documentation shows.
var _ = func(ctx context.Context, db *sql.DB, p *policy.Pipeline) (bool, error) {
	ledger := sqltx.Ledger{} // table backstop_ledger
	if err := ledger.Create(ctx, db); err != nil {
		return false, err
	}
	err := ledger.RunTx(ctx, db, p, nil, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
		return err
	})
	var unknown *sqltx.CommitUnknownError
	if errors.As(err, &unknown) { // the ledger could not be read: ask again later
		committed, err := ledger.Resolve(ctx, db, unknown.Token)
		return committed, err
	}
	return err == nil, err
}
