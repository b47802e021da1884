package sqltx_test

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/adapters/sqltx/internal/pgserver"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A transfer runs as one transaction through a pipeline: a serialization failure or
// a deadlock runs it again, whole; a COMMIT without an answer never does.
func ExampleRunTx() {
	srv, err := pgserver.Start() // a real PostgreSQL in a temporary directory
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	db, err := sql.Open("pgx", srv.DSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO account VALUES (1, 100), (2, 0)"); err != nil {
		fmt.Println(err)
		return
	}

	p, err := policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 5 * time.Second})), policy.Must(retry.New(retry.Options{MaxAttempts: 4})), policy.Name("db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	err = sqltx.RunTxWith(ctx, db, p, &sql.TxOptions{Isolation: sql.LevelSerializable}, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE account SET balance = balance - 30 WHERE id = 1"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE account SET balance = balance + 30 WHERE id = 2")
		return err
	})
	fmt.Println("transfer:", err)
	var a, b int
	if err := db.QueryRow("SELECT (SELECT balance FROM account WHERE id = 1), (SELECT balance FROM account WHERE id = 2)").Scan(&a, &b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a, b)
	fmt.Println(sqltx.Explain(p))
	// Output:
	// transfer: <nil>
	// 70 30
	// database/sql: at most 4 runs of a transaction, each whole, on SQLSTATE 40001 or 40P01, driver.ErrBadConn or a connection lost before COMMIT; never after a COMMIT without an answer, unless a Ledger says it did not commit (database/sql itself redials a connection that failed before anything was sent, inside an attempt)
}
