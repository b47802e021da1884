package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/adapters/sqltx"
	"github.com/backstop-go/backstop/deadline"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/retry"
)

// A cut is where and how one call's first attempt loses its connection.
type cut struct {
	at     string // "begin", "statement" or "commit": the request the toxic meets
	kind   string // "reset_peer" or "timeout"
	stream string // "upstream": the request is lost; "downstream": its answer is
}

// outcomes counts how the calls of a faulted run ended.
type outcomes struct {
	ok, failed       int // returned nil; returned an error
	unknown          int // of the failed: ErrCommitUnknown
	unknownCommitted int // of those: had committed
}

// faultedRun makes n calls through run, one after another, each applying call i
// once: a row in applied and an increment of acct 1. The first attempt of a call
// meets the fault faultOf(i) returns, if any. It checks what no run may break —
// nothing applied twice, nothing applied by a call that failed for another reason
// than ErrCommitUnknown — and returns the outcomes.
func faultedRun(t *testing.T, n int, faultOf func(i int) *cut,
	run func(ctx context.Context, db *sql.DB, fn func(context.Context, *sql.Tx) error) error) (outcomes, *sql.DB) {
	t.Helper()
	f := startFaults(t)
	schema := setup(t)
	direct := connect(t, dsn, schema)
	_, err := direct.Exec("CREATE TABLE applied (call int NOT NULL)")
	require.NoError(t, err)
	db := f.open(t, schema)
	db.SetMaxOpenConns(2)

	var out outcomes
	for i := range n {
		flt := faultOf(i)
		if flt != nil && flt.at == "begin" {
			// An idle pooled connection: the toxic meets the BEGIN.
			require.NoError(t, db.PingContext(bg))
			f.arm(t, flt.kind, flt.stream)
		}
		first := true
		err := run(bg, db, func(ctx context.Context, tx *sql.Tx) error {
			attempt1 := first
			first = false
			if attempt1 && flt != nil && flt.at == "statement" {
				f.arm(t, flt.kind, flt.stream)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO applied VALUES ($1)", i); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE acct SET n = n + 1 WHERE id = 1"); err != nil {
				return err
			}
			if attempt1 && flt != nil && flt.at == "commit" {
				f.arm(t, flt.kind, flt.stream)
			}
			return nil
		})
		f.heal()
		var applied int
		require.NoError(t, direct.QueryRow("SELECT count(*) FROM applied WHERE call = $1", i).Scan(&applied))
		require.LessOrEqual(t, applied, 1, "call %d (%+v) applied twice: %v", i, flt, err)
		switch {
		case err == nil:
			out.ok++
			require.Equal(t, 1, applied, "call %d (%+v) returned nil: applied", i, flt)
		case errors.Is(err, sqltx.ErrCommitUnknown):
			out.failed++
			out.unknown++
			out.unknownCommitted += applied
		default:
			out.failed++
			require.Equal(t, 0, applied, "call %d (%+v) failed (%v) but was applied", i, flt, err)
		}
	}
	var total, rows int
	require.NoError(t, direct.QueryRow("SELECT n FROM acct WHERE id = 1").Scan(&total))
	require.NoError(t, direct.QueryRow("SELECT count(*) FROM applied").Scan(&rows))
	require.Equal(t, rows, total, "increments and rows: one transaction each")
	return out, direct
}

// fenced returns how many transactions the ledger table of direct's schema records
// as not committed: each was resolved so, and run again.
func fenced(t *testing.T, direct *sql.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, direct.QueryRow("SELECT count(*) FROM "+table+" WHERE NOT committed").Scan(&n))
	return n
}

// resetPeer returns the faults of a run of n calls under reset_peer, drawn from a
// fixed seed (23 of 100 calls meet one), at BEGIN, at a statement or at COMMIT, in
// either direction.
func resetPeer(n int) func(int) *cut {
	r := rand.New(rand.NewPCG(1, 2))
	plan := make([]*cut, n)
	ats, streams := []string{"begin", "statement", "commit"}, []string{"upstream", "downstream"}
	for i := range plan {
		if r.IntN(5) < 2 {
			plan[i] = &cut{at: ats[r.IntN(3)], kind: "reset_peer", stream: streams[r.IntN(2)]}
		}
	}
	return func(i int) *cut { return plan[i] }
}

func retry4() *policy.Pipeline {
	return policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 10 * time.Second})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 4, Base: time.Millisecond, Cap: time.Millisecond})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 2 * time.Second}))))
}

// Under reset_peer, RunTx retries every call whose connection broke before COMMIT
// was sent; the only failures left are the COMMITs without an answer, which had
// committed exactly when the answer, not the request, was lost. Through a Ledger,
// every call succeeds, once.
func TestFaults_ResetPeer(t *testing.T) {
	const n = 100
	plan := resetPeer(n)
	out, _ := faultedRun(t, n, plan, func(ctx context.Context, db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
		return sqltx.RunTx(ctx, db, retry4(), fn)
	})
	t.Logf("RunTx under reset_peer: %d calls, %d ok, %d failed (%.0f %%), of which %d ErrCommitUnknown (%d had committed)",
		n, out.ok, out.failed, 100*float64(out.failed)/n, out.unknown, out.unknownCommitted)
	var faulted, atCommit, answersLost int
	for i := range n {
		if plan(i) != nil {
			faulted++
		}
		if c := plan(i); c != nil && c.at == "commit" {
			atCommit++
			if c.stream == "downstream" {
				answersLost++
			}
		}
	}
	t.Logf("faults: %d calls of %d, %d at COMMIT (%d answers lost)", faulted, n, atCommit, answersLost)
	require.Equal(t, outcomes{ok: n - atCommit, failed: atCommit, unknown: atCommit, unknownCommitted: answersLost}, out,
		"RunTx's outcomes: only a fault at COMMIT fails; it committed when the answer was lost")

	created := false
	ledger := sqltx.Ledger{}
	out, direct := faultedRun(t, n, plan, func(ctx context.Context, db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
		if !created {
			created = true
			require.NoError(t, ledger.Create(ctx, db))
		}
		return ledger.RunTx(ctx, db, retry4(), nil, fn)
	})
	f := fenced(t, direct, sqltx.DefaultLedgerTable)
	t.Logf("Ledger.RunTx under reset_peer: %d calls, %d ok, %d failed; %d COMMITs without an answer resolved: %d committed, %d fenced and run again",
		n, out.ok, out.failed, atCommit, atCommit-f, f)
	require.Equal(t, outcomes{ok: n}, out, "Ledger.RunTx's outcomes")
	require.Equal(t, atCommit-answersLost, f, "transactions fenced: those whose COMMIT was lost")
}

// Under timeout toxics a lost request or answer hangs until the per-attempt timeout.
// Through a Ledger, a COMMIT whose answer was dropped is found committed, one whose
// request was dropped is fenced and run again: every call succeeds, once.
func TestFaults_Timeout(t *testing.T) {
	plan := []*cut{
		{at: "commit", kind: "timeout", stream: "downstream"},
		nil,
		{at: "commit", kind: "timeout", stream: "upstream"},
		{at: "statement", kind: "timeout", stream: "upstream"},
		nil,
		{at: "statement", kind: "timeout", stream: "downstream"},
	}
	p := policy.Must(policy.Wrap(policy.Must(deadline.New(deadline.Options{Timeout: 10 * time.Second})),
		policy.Must(retry.New(retry.Options{MaxAttempts: 3, Base: time.Millisecond, Cap: time.Millisecond})),
		policy.Must(deadline.NewPerAttempt(deadline.Options{Timeout: 300 * time.Millisecond}))))
	ledger := sqltx.Ledger{Table: "ledger"}
	created := false
	out, direct := faultedRun(t, len(plan), func(i int) *cut { return plan[i] }, func(ctx context.Context, db *sql.DB, fn func(context.Context, *sql.Tx) error) error {
		if !created {
			created = true
			require.NoError(t, ledger.Create(ctx, db))
		}
		return ledger.RunTx(ctx, db, p, nil, fn)
	})
	require.Equal(t, outcomes{ok: len(plan)}, out, "Ledger.RunTx's outcomes under timeout")
	require.Equal(t, 1, fenced(t, direct, "ledger"), "transactions fenced: the one whose COMMIT was dropped")
}
