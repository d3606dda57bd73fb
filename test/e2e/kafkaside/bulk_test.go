package kafkaside

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTransactionLongerThanTheDeliveryTimeout: one transaction of 600,000
// rows takes several times --kafka-delivery-timeout (2s) to relay, while
// Kafka acknowledges all along. The delivery timeout bounds how long a
// record waits for Kafka, not how long a transaction takes: it arrives
// whole, without a restart, and the slot passes it.
func TestTransactionLongerThanTheDeliveryTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The topic exists, so that its creation does not count.
	e.Bed.CreateTopic(t, "outbox.event."+e.AggType(0), 3)
	c := e.Collect(t)
	relay := e.Start(t, "--kafka-delivery-timeout", "2s")
	relay.WaitStreaming()

	const n = 600000
	// N.B. not e.Bed.Exec's minute: on a busy machine 600,000 rows take
	// longer, and the test is about what walrelay does once they commit.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := testbed.Exec(ctx, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated',
		jsonb_build_object('seq', 1 + i / 97, 'pad', repeat('p', 100)) FROM generate_series(0, $2 - 1) i`, e.AggType(0), n); err != nil {
		t.Fatalf("insert %d rows: %v", n, err)
	}
	committed := time.Now()
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	rows := e.CommittedRows(t)
	c.WaitFor(len(rows), 5*time.Minute)
	inKafka := time.Since(committed)
	harness.WaitFor(t, time.Minute, "the slot to pass the transaction", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	e2etest.CheckRecords(t, e, c.ToEnd(), rows, nil, 3, false)
	if strings.Contains(relay.Log(), "restarting") {
		t.Errorf("walrelay restarted while Kafka acknowledged the transaction's records")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
	t.Logf("FIGURES bulk_rows=%d commit_to_all_in_kafka=%s delivery_timeout=2s peak_rss_mb=%.1f", n, inKafka.Round(time.Millisecond), relay.PeakRSSMB())
}
