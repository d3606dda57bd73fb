package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestWitnessKeepsTheCommitsOfAnInterruptedDrain: a Drain cut short after
// reading the first of 20 commits (as a PostgreSQL restart or a lost
// connection cuts one) loses none of them: the next Drain gives each of the
// 20 transactions its commit end, after the WAL insert position before its
// COMMIT and at or before the one after it.
func TestWitnessKeepsTheCommitsOfAnInterruptedDrain(t *testing.T) {
	e := NewEnv(t, "")
	w := NewWitness(t, e)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	type tx struct {
		xid           uint32
		before, after string // pg_current_wal_insert_lsn() before its COMMIT and after
	}
	insertLSN := func() string {
		var lsn string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	var txs []tx
	for i := range 20 {
		var x tx
		err := pgx.BeginFunc(ctx, conn, func(q pgx.Tx) error {
			if _, err := q.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), 'a', $1, 't', '{}')`, fmt.Sprint(i)); err != nil {
				return err
			}
			x.before = insertLSN()
			return q.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint % 4294967296`).Scan(&x.xid)
		})
		if err != nil {
			t.Fatal(err)
		}
		x.after = insertLSN()
		txs = append(txs, x)
	}

	read := 0
	w.afterRow = func() error {
		read++
		return errors.New("cut short")
	}
	if err := w.Drain(ctx); err == nil || read != 1 {
		t.Fatalf("a Drain cut short after its first commit: error %v after %d commits, want an error after 1", err, read)
	}
	w.afterRow = nil
	ends := w.CommitEnds(t)
	seen := map[string]bool{}
	for i, x := range txs {
		end, ok := ends[x.xid]
		if !ok {
			t.Errorf("transaction %d (xid %d): no commit end after the interrupted Drain and another (%d commits known)", i, x.xid, len(ends))
			continue
		}
		var within bool
		if err := conn.QueryRow(ctx, `SELECT $1::text::pg_lsn > $2::text::pg_lsn AND $1::text::pg_lsn <= $3::text::pg_lsn`, end.String(), x.before, x.after).Scan(&within); err != nil {
			t.Fatal(err)
		}
		if !within || seen[end.String()] {
			t.Errorf("transaction %d (xid %d): commit end %s, want a distinct one after %s and at or before %s", i, x.xid, end, x.before, x.after)
		}
		seen[end.String()] = true
	}
}
