package e2etest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/harness"
)

// A pending transaction is one walrelay must not confirm yet. PostgreSQL
// sends a transaction again after a restart exactly when the slot's
// confirmed_flush_lsn lies before its commit record, so that is what the
// tests check, against the commit end a witness slot reports.
//
// N.B. the WAL position noted just before the commit is not a bound: other
// databases of the shared server write WAL between it and the commit
// record, and walrelay rightly confirms keepalive positions there while it
// has nothing in flight.

// Witness starts a test_decoding slot in e's database; it must exist before
// the transactions it is asked about.
func (e *Env) Witness(t *testing.T) *harness.Witness {
	t.Helper()
	return harness.NewWitness(t, &harness.Env{Bed: e.Bed, DSN: e.DSN})
}

// ExecXid runs sql in a transaction of its own and returns its xid.
func (e *Env) ExecXid(t *testing.T, sql string, args ...any) uint32 {
	t.Helper()
	return e.TxXid(t, func(tx pgx.Tx) {
		if _, err := tx.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	})
}

// TxXid runs do in a transaction, commits it and returns its xid.
func (e *Env) TxXid(t *testing.T, do func(pgx.Tx)) uint32 {
	t.Helper()
	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	do(tx)
	xid := CurrentXid(t, tx)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return xid
}

// CurrentXid is the xid of the open transaction tx.
func CurrentXid(t *testing.T, tx pgx.Tx) uint32 {
	t.Helper()
	var xid int64
	if err := tx.QueryRow(context.Background(), `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	return uint32(xid)
}

// CheckPending fails the test when the slot has confirmed transaction xid:
// PostgreSQL would not send it again.
func (e *Env) CheckPending(t *testing.T, wit *harness.Witness, xid uint32, what string) {
	t.Helper()
	end, ok := wit.CommitEnds(t)[xid]
	if !ok {
		t.Fatalf("the witness saw no commit of %s (xid %d)", what, xid)
	}
	if s := e.Bed.Slot(t, e.DSN, e.Slot); s.ConfirmedFlushLSN >= end {
		t.Errorf("confirmed_flush_lsn %s is past %s (xid %d, commit record ends at %s): PostgreSQL would not send it again", s.ConfirmedFlushLSN, what, xid, end)
	}
}
