package sqltx_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/fault"
	"github.com/backstop-go/backstop/retry"
)

// stateErr is a driver's error carrying a SQLSTATE, as pgconn.PgError and pq.Error do.
type stateErr string

func (s stateErr) Error() string    { return "ERROR: SQLSTATE " + string(s) }
func (s stateErr) SQLState() string { return string(s) }

// safeToRetry is a pgx error that says nothing was sent.
type safeToRetry struct{}

func (safeToRetry) Error() string     { return "failed to write startup message" }
func (safeToRetry) SafeToRetry() bool { return true }

// timeout is a network timeout.
type timeout struct{}

func (timeout) Error() string   { return "i/o timeout" }
func (timeout) Timeout() bool   { return true }
func (timeout) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	cases := []struct {
		err        error
		committing bool
		retried    bool
		permanent  bool
		unknown    bool // matches ErrCommitUnknown
	}{
		{stateErr("40001"), false, true, false, false},
		{stateErr("40001"), true, true, false, false}, // at COMMIT: rolled back
		{stateErr("40P01"), false, true, false, false},
		{fmt.Errorf("transfer: %w", stateErr("40P01")), false, true, false, false},
		{driver.ErrBadConn, false, true, false, false},
		{driver.ErrBadConn, true, true, false, false}, // nothing was sent
		{stateErr("23505"), false, false, true, false},
		{stateErr("23505"), true, false, true, false},
		{stateErr("25P02"), false, false, true, false},  // in failed transaction
		{stateErr("57P01"), false, false, false, false}, // terminated: not retried here, not Permanent
		{stateErr("08006"), false, false, false, false}, // connection failure
		{stateErr("57P01"), true, false, true, false},   // at COMMIT: the server answered
		{io.ErrUnexpectedEOF, true, false, true, true},
		{io.ErrUnexpectedEOF, false, true, false, false},                               // before COMMIT: rolled back
		{fmt.Errorf("read: %w", errors.New("conn closed")), false, true, false, false}, // pgconn.ErrConnClosed
		{errors.New("conn closed"), true, false, true, true},                           // at COMMIT: may have committed
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false, true, false, false},
		{&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, true, false, true, true},
		{safeToRetry{}, true, true, false, false},                                         // pgx: nothing was sent
		{&net.OpError{Op: "read", Net: "tcp", Err: timeout{}}, false, true, false, false}, // left to the retry's classifier, which retries a timeout
		{context.DeadlineExceeded, false, true, false, false},                             // left as it is: the retry tells its own deadline from the caller's
		{context.DeadlineExceeded, true, false, true, true},
		{sql.ErrTxDone, true, false, true, true},
		{errors.New("commit unexpectedly resulted in rollback"), true, false, false, false}, // pgx: the server answered ROLLBACK
		{errors.New("the caller's own error"), false, false, false, false},
	}
	for _, tc := range cases {
		got := sqltx.Classify(tc.err, tc.committing)
		m := fault.Of(got)
		if retry.DefaultShouldRetry(got) != tc.retried || m.Permanent != tc.permanent ||
			errors.Is(got, sqltx.ErrCommitUnknown) != tc.unknown {
			t.Errorf("Classify(%v, committing=%v): retried %v, permanent %v, unknown commit %v; want %v, %v, %v",
				tc.err, tc.committing, retry.DefaultShouldRetry(got), m.Permanent, errors.Is(got, sqltx.ErrCommitUnknown),
				tc.retried, tc.permanent, tc.unknown)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Classify(%v, committing=%v) = %v, which does not unwrap to it", tc.err, tc.committing, got)
		}
	}
	if sqltx.Classify(nil, true) != nil {
		t.Error("Classify(nil) != nil")
	}
}
