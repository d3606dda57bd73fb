package e2e

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// createdAt is e2etest.CreatedAtDDL.
const createdAt = e2etest.CreatedAtDDL

// TestBackfillOnAdoption: rows committed before walrelay's slot exists (a
// polling relay's past), rows committed while `run --backfill` creates the
// slot and reads its snapshot, and rows after: each is in Kafka, read back
// to the end offsets, per aggregate in commit order; every row committed
// before walrelay started carries walrelay.recovered: backfill.
func TestBackfillOnAdoption(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, createdAt)
	past := &harness.Workload{Writers: 2, Events: 200, Aggregates: 10, MaxTxRows: 3, Rollback: 0.1, Pause: time.Millisecond}
	past.Prepare(t, e.Env)
	if err := past.Run(context.Background(), e.Env); err != nil {
		t.Fatal(err)
	}
	pre := e.CommittedRows(t)
	c := e.Collect(t)
	live := &harness.Workload{Writers: 2, Aggregates: 10, MaxTxRows: 3, Rollback: 0.1, Pause: 2 * time.Millisecond}
	writing := live.Start(e.Env)
	defer writing.Stop()
	relay := e.Start(t, "--backfill", "--recover-column", "created_at")
	relay.WaitStreamingLogged()
	harness.WaitFor(t, 2*time.Minute, "the writers to commit 300 events after walrelay started", func() bool {
		return live.Committed() >= 300
	})
	if err := writing.Stop(); err != nil {
		t.Fatal(err)
	}
	end := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the slot to be confirmed past the last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= end
	})
	rows := e.CommittedRows(t)
	rolledBack := past.RolledBack()
	maps.Copy(rolledBack, live.RolledBack())
	recs := c.ToEnd()
	v, recovered := e2etest.CheckRecovered(t, recs, rows, rolledBack, "backfill")
	backfilled := map[string]bool{}
	for _, r := range recs {
		if _, ok := harness.Header(r, e2etest.RecoveredHeader); ok {
			id, _ := harness.Header(r, "id")
			backfilled[id] = true
		}
	}
	missing := 0
	for id := range pre {
		if !backfilled[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d rows committed before walrelay's slot existed carry no %s header", missing, len(pre), e2etest.RecoveredHeader)
	}
	if recovered >= len(recs) {
		t.Errorf("every record was backfilled (%d): none came from the slot, though the writers committed while walrelay streamed", recovered)
	}
	for _, want := range []string{"backfill of slot " + e.Slot + ": new slot created at consistent point", "rows read"} {
		if !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay's log does not say %q:\n%s", want, relay.Log())
		}
	}
	t.Logf("FIGURES before_slot=%d committed=%d records=%d backfilled=%d duplicates=%d", len(pre), len(rows), len(recs), recovered, v.Duplicates)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestRecoveryRefusals: what a recovery cannot do. Without
// track_commit_timestamp and without --recover-column there is no order
// per aggregate: --backfill refuses to start (exit 2) naming both fixes; a
// column that says nothing of commit order, or that does not exist, is
// refused the same way, and no slot is created. Rows deleted in the
// transaction that inserted them cannot be recovered: the account says
// so, with how many deletes the server counted and what to change.
func TestRecoveryRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, createdAt)
	var track string
	if err := e.Bed.QueryRow(t, e.DSN, `SHOW track_commit_timestamp`).Scan(&track); err != nil {
		t.Fatal(err)
	}
	if track != "off" {
		t.Fatalf("the bed's track_commit_timestamp is %s: this test needs it off", track)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no order", nil, []string{"track_commit_timestamp is off and no --recover-column", "--recover-column created_at", "ALTER SYSTEM SET track_commit_timestamp = on"}},
		{"column without order", []string{"--recover-column", "type"}, []string{"--recover-column type: column of public.outbox is text, which says nothing of when a row was committed"}},
		{"no such column", []string{"--recover-column", "made_at"}, []string{"--recover-column made_at: table public.outbox has no such column"}},
	} {
		relay := e.Start(t, append([]string{"--backfill"}, tc.args...)...)
		if code := relay.Wait(time.Minute); code != 2 {
			t.Errorf("%s: walrelay exit code %d, want 2; log:\n%s", tc.name, code, relay.Log())
		}
		for _, w := range tc.want {
			if !strings.Contains(relay.Log(), w) {
				t.Errorf("%s: walrelay does not say %q; log:\n%s", tc.name, w, relay.Log())
			}
		}
		if s := e.Bed.Slot(t, e.DSN, e.Slot); s.Exists {
			t.Fatalf("%s: slot %s was created though walrelay refused", tc.name, e.Slot)
		}
	}

	// Nothing to recover: the slot was never streamed from.
	out, code := e2etest.RunCmd(t, e, "recover", "--recover-column", "created_at")
	if code != 0 || !strings.Contains(out, "nothing to do: no marker of this slot") {
		t.Errorf("walrelay recover without a marker: exit %d, want 0 saying there is nothing to do:\n%s", code, out)
	}

	// An outbox whose rows are deleted in the transaction that inserts them.
	conn := harness.Connect(t, e.DSN)
	for _, q := range []string{`BEGIN`, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), '` + e.AggType(0) + `', 'agg-2', 'T', '{"n": 2}')`,
		`DELETE FROM outbox WHERE aggregateid = 'agg-2'`, `COMMIT`} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// N.B. a session's counts reach pg_stat_user_tables when it ends.
	conn.Close(context.Background())
	kept := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'agg-3', 'T', '{"n": 3}')`, kept, e.AggType(0))
	harness.WaitFor(t, time.Minute, "the server to count the deletes", func() bool {
		var n int64
		if err := e.Bed.QueryRow(t, e.DSN, `SELECT n_tup_del FROM pg_stat_user_tables WHERE relid = 'outbox'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= 1
	})
	c := e.Collect(t)
	relay := e.Start(t, "--backfill", "--recover-column", "created_at")
	relay.WaitStreamingLogged()
	recs := c.WaitFor(1, time.Minute)
	if id, _ := harness.Header(recs[0], "id"); id != kept {
		t.Errorf("backfilled record %s, want the row kept, %s", id, kept)
	}
	for _, want := range []string{"NOT RECOVERED: table public.outbox: ", "row(s) were deleted since", "cannot be recovered", "never in the inserting transaction"} {
		if !strings.Contains(relay.Log(), want) {
			t.Errorf("walrelay does not say %q about the deleted rows; log:\n%s", want, relay.Log())
		}
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
