package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestConfirmedPromptlyAfterAcknowledgement: once Kafka has acknowledged a
// transaction, walrelay confirms it on the slot without waiting for the
// next status interval's update (docs/performance.md, "Confirmation"):
// what a crash sends again is what Kafka acknowledged in the last moment,
// not in the last status interval.
//
// N.B. --status-interval 10s, walrelay's default, and a deadline of 5 s
// after the transaction was read back from Kafka: a relay that confirms
// only at its status interval (and behind a publication check run every
// 5 s) misses it for most transactions, and for every one that follows
// its previous confirmation at once. It is not a performance threshold: a
// prompt confirmation is due within about a tenth of a second
// (replication.ConfirmGap plus a round of the publication check), fifty
// times less; 5 s is what separates "prompt" from "at the next interval"
// on a busy machine. Four transactions in a row, each inserted right after
// the previous one was confirmed.
func TestConfirmedPromptlyAfterAcknowledgement(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	relay := e.Start(t, "--status-interval", "10s")
	relay.WaitStreaming()
	c := e.Collect(t)
	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	for i := 1; i <= 4; i++ {
		// N.B. a position inside the transaction, before its commit
		// record: walrelay confirms whole transactions only, so
		// confirmed_flush_lsn passes it only by confirming this one.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', jsonb_build_object('n', $3::int))`, harness.NewUUID(), e.AggType(0), i); err != nil {
			t.Fatal(err)
		}
		var inside string
		if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&inside); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		pos, err := pglogrepl.ParseLSN(inside)
		if err != nil {
			t.Fatal(err)
		}
		c.WaitFor(i, time.Minute)
		acked := time.Now()
		harness.WaitFor(t, 5*time.Second, fmt.Sprintf("confirmed_flush_lsn to pass transaction %d (%s) after Kafka acknowledged it, before the next 10s status interval", i, pos), func() bool {
			if relay.Exited() {
				t.Fatalf("walrelay exited: %v\n%s", relay.Err(), relay.Log())
			}
			return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN > pos
		})
		t.Logf("transaction %d: confirmed %s after it was read back", i, time.Since(acked).Round(time.Millisecond))
	}
	e2etest.CheckRecords(t, e, c.ToEnd(), e.CommittedRows(t), nil, 3, false)
	if n, ok := relay.MetricOK("walrelay_confirm_lag_seconds_count"); !ok || n < 4 {
		t.Errorf("walrelay_confirm_lag_seconds_count = %v (exported: %v), want at least 4: one observation per confirmed transaction", n, ok)
	}
}
