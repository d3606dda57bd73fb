package failover

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestBackfillOrdersATransactionsRowsAsInserted: PostgreSQL 15 with
// track_commit_timestamp = on, where the rows of one transaction share a
// commit time. A hole is made in the outbox's first page (a row deleted,
// VACUUM records the free space); then a transaction inserts a row too
// large for the hole (PostgreSQL puts it on a new page, which it nearly
// fills) and then smaller rows of the same aggregate (PostgreSQL puts the
// first of them in the hole): physical order is not insertion order, as
// PostgreSQL says (ctid). `run --backfill`, ordering rows by their commit
// time, must publish that transaction's rows in the order it inserted
// them; every row is read back from Kafka, per aggregate in commit order.
//
// N.B. a make test run failed TestRecoverOrdersByCommitTimestamp with
// order_violations=1 gaps=1 this way: its writers' transactions sometimes
// hold two rows of one aggregate, and concurrent writers sometimes get a
// page from the free space map between them.
func TestBackfillOrdersATransactionsRowsAsInserted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := testbed.StartPGPair(t, "15", testbed.Setting("track_commit_timestamp", "on"))
	e := failoverEnv(t, pair)
	dsn := pair.PrimaryURL("failover")
	conn := harness.Connect(t, dsn)
	defer conn.Close(ctx)
	// N.B. rows kept in the page up to 8160 bytes, not compressed or
	// moved out of line: the test decides their size.
	e.Bed.Exec(t, dsn, `ALTER TABLE outbox SET (toast_tuple_target = 8160)`)
	insert := `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'Placed', jsonb_build_object('seq', $4::int, 'pad', repeat('x', $5::int)))`
	for i := range 8 {
		if _, err := conn.Exec(ctx, insert, harness.NewUUID(), e.AggType(0), fmt.Sprintf("fill-%d", i), 1, 1800); err != nil {
			t.Fatal(err)
		}
	}
	// The hole: VACUUM records it once the standby's feedback lets it
	// remove the deleted row.
	e.Bed.Exec(t, dsn, `DELETE FROM outbox WHERE id = (SELECT id FROM outbox ORDER BY ctid LIMIT 1)`)
	e.Bed.Exec(t, dsn, `CREATE EXTENSION IF NOT EXISTS pg_freespacemap`)
	harness.WaitFor(t, time.Minute, "VACUUM to record the first page's free space", func() bool {
		var avail int
		if _, err := conn.Exec(ctx, `VACUUM outbox`); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT pg_freespace('outbox', 0)`).Scan(&avail); err != nil {
			t.Fatal(err)
		}
		return avail >= 1800
	})
	const agg = "placed"
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	for seq, size := range []int{0: 7400, 1: 800, 2: 800} {
		if _, err := conn.Exec(ctx, insert, harness.NewUUID(), e.AggType(0), agg, seq+1, size); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	// N.B. the truth from PostgreSQL: seq is the insertion order.
	var physical string
	if err := conn.QueryRow(ctx, `SELECT string_agg((payload->>'seq') || ' at ' || ctid::text, ', ' ORDER BY outbox.ctid) FROM outbox WHERE aggregateid = $1`, agg).Scan(&physical); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(physical, "2 at (0,") {
		t.Fatalf("the transaction's rows in physical order: %s; want the second in the first page's hole, before the first", physical)
	}
	t.Logf("the transaction's rows in physical order: %s", physical)
	pair.WaitReplayed(t)

	c := e.Collect(t)
	relay := e.Start(t, "--backfill")
	relay.WaitStreamingLogged()
	harness.WaitFor(t, 2*time.Minute, "walrelay to say the backfilled records are acknowledged", func() bool {
		return strings.Contains(relay.Log(), "every record above is acknowledged by Kafka")
	})
	if !strings.Contains(relay.Log(), "ordered per aggregate by pg_xact_commit_timestamp(xmin)") {
		t.Errorf("walrelay's log does not say it ordered the rows by commit time:\n%s", relay.Log())
	}
	rows := e.CommittedRows(t)
	recs := c.ToEnd()
	v, recovered := e2etest.CheckRecovered(t, recs, rows, nil, "backfill")
	if recovered != len(rows) {
		t.Errorf("%d of the %d rows carry %s: backfill, want every one (all were committed before the slot)", recovered, len(rows), e2etest.RecoveredHeader)
	}
	var got []string
	for _, r := range recs {
		if string(r.Key) == agg {
			id, _ := harness.Header(r, "id")
			got = append(got, fmt.Sprint(rows[id].Seq))
		}
	}
	if want := "1,2,3"; strings.Join(got, ",") != want {
		t.Errorf("aggregate %s in Kafka: seq %v, want %s (the order its transaction inserted them)", agg, got, want)
	}
	t.Logf("FIGURES rows=%d records=%d backfilled=%d duplicates=%d", len(rows), len(recs), recovered, v.Duplicates)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
