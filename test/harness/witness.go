package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Witness learns the commit position of every transaction of the test's
// database from a second logical slot (test_decoding), created before the
// first write. PostgreSQL reports each COMMIT at the end of its commit record
// (the transaction's end_lsn), exactly the position walrelay confirms for it,
// so the checker can tell whether a duplicate lies after a confirmed
// position without trusting walrelay.
//
// N.B. the slot is consumed as the test goes (Drain), so it pins little WAL;
// the test database's cleanup drops it.
type Witness struct {
	dsn  string
	slot string

	drainMu sync.Mutex // one reader of the slot at a time
	mu      sync.Mutex
	ends    map[uint32]pglogrepl.LSN // xid -> commit end

	// afterRow, when set, is called after each commit a Drain reads; an
	// error ends the Drain there (a test's hook to interrupt one).
	afterRow func() error
}

// NewWitness creates the witness slot in e's database.
func NewWitness(t testing.TB, e *Env) *Witness {
	t.Helper()
	w := &Witness{dsn: e.DSN, slot: "w_" + Uniq(), ends: map[uint32]pglogrepl.LSN{}}
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, w.slot)
	return w
}

// Drain reads the commits decoded since the last call: it peeks at the
// slot, keeps every commit it read, and only then advances the slot past
// the last of them.
//
// N.B. not pg_logical_slot_get_changes: it moves the slot when the function
// ends, before its rows reach the client, so a Drain cut short (a
// PostgreSQL restart under a loaded machine, the connection lost) lost
// their commits for good: "5579 committed rows have no commit position in
// the witness" in TestPostgresRestartExactlyOnce, with make test's three
// beds and another suite on two cores.
func (w *Witness) Drain(ctx context.Context) error {
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT lsn::text, xid::text FROM pg_logical_slot_peek_changes($1, NULL, NULL, 'skip-empty-xacts', '1')
		WHERE data LIKE 'COMMIT%'`, w.slot)
	if err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	type commit struct {
		xid uint32
		end pglogrepl.LSN
	}
	var got []commit
	for rows.Next() {
		var lsn, xid string
		if err := rows.Scan(&lsn, &xid); err != nil {
			return fmt.Errorf("witness: %w", err)
		}
		end, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			return fmt.Errorf("witness: %w", err)
		}
		x, err := strconv.ParseUint(xid, 10, 32)
		if err != nil {
			return fmt.Errorf("witness: xid %q: %w", xid, err)
		}
		got = append(got, commit{uint32(x), end})
		if w.afterRow != nil {
			if err := w.afterRow(); err != nil {
				return fmt.Errorf("witness: %w", err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	var last pglogrepl.LSN
	w.mu.Lock()
	for _, c := range got {
		w.ends[c.xid] = c.end
		last = max(last, c.end)
	}
	w.mu.Unlock()
	if last == 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)`, w.slot, last.String()); err != nil {
		return fmt.Errorf("witness: advance the slot to %s: %w", last, err)
	}
	return nil
}

// DrainEvery drains in the background until the test ends, ignoring
// errors (a server restart, say): the final Drain must succeed.
func (w *Witness) DrainEvery(t testing.TB, every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = w.Drain(ctx)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// CommitEnds drains the last commits and returns every commit end by xid.
func (w *Witness) CommitEnds(t testing.TB) map[uint32]pglogrepl.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[uint32]pglogrepl.LSN, len(w.ends))
	for x, end := range w.ends {
		out[x] = end
	}
	return out
}
