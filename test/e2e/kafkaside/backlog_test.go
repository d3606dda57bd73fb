package kafkaside

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
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
	time.Sleep(6 * time.Second) // older than the delivery timeout below
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
