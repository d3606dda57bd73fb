package kafkaside

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// lingerLong is a --kafka-linger far longer than a produce round trip, for
// the tests that walrelay does not wait for its own lingering records.
const lingerLong = "10s"

// TestLingerDoesNotProlongWaitsForRoom: a transaction eight times
// --max-inflight-bytes makes walrelay wait for room again and again, which
// only acknowledgements make. With --kafka-linger 10s each wait used to last
// until the records holding the room had lingered out, ten seconds a time;
// walrelay now sends what lingers before it waits, so all 16,000 records
// arrive, exactly once and in order, within 45 s, and the slot passes them.
// (Only the last records, produced after the last wait, linger their 10 s.)
func TestLingerDoesNotProlongWaitsForRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.CreateTopic(t, "outbox.event."+e.AggType(0), 3)
	c := e.Collect(t)
	relay := e.Start(t, "--kafka-linger", lingerLong, "--kafka-compression", "none", "--max-inflight-bytes", "2097152")
	relay.WaitStreaming()

	// N.B. 16,000 records of 1 KiB over 3 partitions: no partition's batch
	// fills (1 MB) before the in-flight limit (2 MiB) is reached.
	ctx := context.Background()
	e.TxXid(t, func(tx pgx.Tx) {
		if _, err := tx.Exec(ctx, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 7), 'OrderCreated',
			jsonb_build_object('seq', i / 7, 'pad', repeat('p', 1000)) FROM generate_series(0, 15999) i`, e.AggType(0)); err != nil {
			t.Fatal(err)
		}
	})
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 45*time.Second)
	harness.WaitFor(t, time.Minute, "the slot to pass the transaction", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, false)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
