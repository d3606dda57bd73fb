package kafkaside

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestBacklogOlderThanTheDeliveryTimeout: records carry their commit time;
// a backlog committed longer ago than --kafka-delivery-timeout is relayed
// like any other (the timeout counts from the hand-off to Kafka).
func TestBacklogOlderThanTheDeliveryTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// The topic exists, so that its creation does not count against the
	// short timeout below.
	e.Bed.CreateTopic(t, "outbox.event."+e.AggType(0), 3)
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 7), 'T', jsonb_build_object('seq', 1 + i / 7) FROM generate_series(0, 499) i`, e.AggType(0))
	// N.B. the condition is the backlog's age by PostgreSQL's clock (the
	// commit times walrelay stamps), older than the delivery timeout below.
	var committed time.Time
	e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp()`).Scan(&committed)
	harness.WaitFor(t, time.Minute, "the backlog to be 6 s old by PostgreSQL's clock", func() bool {
		var old bool
		e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp() - $1::timestamptz > interval '6 seconds'`, committed).Scan(&old)
		return old
	})
	relay = e.Start(t, "--kafka-delivery-timeout", "5s")
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), time.Minute)
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, false)
	if strings.Contains(relay.Log(), "restarting") {
		t.Errorf("walrelay restarted while relaying an old backlog")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
