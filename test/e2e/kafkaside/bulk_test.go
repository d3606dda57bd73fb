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

// TestTransactionLongerThanTheDeliveryTimeout: one transaction of 100,000
// rows reaches walrelay through a proxy that passes the walsender's stream
// at 512 KiB/s, so that relaying it takes several times
// --kafka-delivery-timeout (15 s), while Kafka acknowledges all along. The
// delivery timeout bounds how long a record waits for Kafka, not how long a
// transaction takes: it arrives whole, without a restart, and the slot
// passes it.
//
// N.B. the stream is slowed, not the transaction made huge: with 600,000
// rows and a 2 s timeout the test's own load stalled the bed's Kafka past
// 2 s in a make test ("kafka has not acknowledged a record handed to it 2s
// ago", a restart, 465,890 duplicates), and on a quiet machine the
// transaction was in Kafka in 4.8 s, too soon for a longer timeout. With
// 8 s and 1 MB/s, a make test run with three test beds at once (load 25 on
// two cores) stalled the bed's Kafka past 8 s three times ("kafka has not
// acknowledged a record handed to it 8s ago": restarts, 68,097
// duplicates): the stream is slowed further and the timeout is 15 s.
func TestTransactionLongerThanTheDeliveryTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The topic exists, so that its creation does not count.
	e.Bed.CreateTopic(t, "outbox.event."+e.AggType(0), 3)
	c := e.Collect(t)
	pg := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	const timeout = 15 * time.Second
	relay := e.Start(t, "--pg-url", harness.DSNVia(t, e.DSN, pg.Addr(), nil), "--kafka-delivery-timeout", timeout.String())
	relay.WaitStreaming()
	pg.SetServerRate(512 << 10)

	const n = 100000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testbed.Exec(ctx, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 97), 'OrderCreated',
		jsonb_build_object('seq', 1 + i / 97, 'pad', repeat('p', 100)) FROM generate_series(0, $2 - 1) i`, e.AggType(0), n); err != nil {
		t.Fatalf("insert %d rows: %v", n, err)
	}
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	rows := e.CommittedRows(t)
	c.WaitFor(1, 5*time.Minute)
	first := time.Now()
	c.WaitFor(len(rows), 5*time.Minute)
	// N.B. from the first record in Kafka to the last: walrelay handed the
	// transaction to Kafka over at least that long.
	span := time.Since(first)
	if span < 2*timeout {
		t.Fatalf("the transaction's records reached Kafka within %s, want at least twice the delivery timeout (%s): the test proves nothing; slow the proxy", span.Round(time.Millisecond), timeout)
	}
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
	t.Logf("FIGURES bulk_rows=%d first_to_last_in_kafka=%s delivery_timeout=%s peak_rss_mb=%.1f", n, span.Round(time.Millisecond), timeout, relay.PeakRSSMB())
}
