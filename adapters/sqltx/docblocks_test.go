package sqltx_test

import (
	"context"
	"database/sql"
	"time"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(ctx context.Context, db *sql.DB) error {
	p, err := policy.Wrap(deadline.MustNew(2*time.Second), retry.MustNew(retry.Options{}), policy.Name("db"))
	if err != nil {
		return err
	}
	err = sqltx.RunTx(ctx, db, p, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE acct SET n = n - 10 WHERE id = 1")
		return err
	})
	return err
}
