package kafkaside

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestCheckpointReadWaitsForAnotherTransaction: exactly-once pipelines
// share the checkpoint topic's partition, and a transaction another
// producer has open on it (here the test's own transactional producer; a
// pipeline's is open from its checkpoint record until the broker wrote
// its commit's markers) holds the partition's last stable offset below
// every checkpoint walrelay commits after it began. walrelay's status
// updates never reach PostgreSQL (a proxy drops them), so after a kill -9
// the slot sends both transactions again and only the checkpoint says
// which are in Kafka. The restarted walrelay must not read its checkpoint
// up to that last stable offset (the first transaction's checkpoint: the
// second transaction produced twice) but wait until the open transaction
// is decided, saying so in /readyz, a metric and the log; then skip both:
// each event once for a read_committed consumer.
func TestCheckpointReadWaitsForAnotherTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wit := e.Witness(t)
	cp, topic := e.CheckpointTopic(), "outbox.event."+e.AggType(0)
	e.Bed.CreateTopic(t, topic, 3)
	args := []string{"--exactly-once", "--checkpoint-topic", cp}
	pg := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	pg.Drop(harness.PGStatusUpdate)
	relay := e.Start(t, append(args, "--pg-url", harness.DSNVia(t, e.DSN, pg.Addr(), nil))...)
	relay.WaitStreaming()
	start := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN

	// committed inserts an event and waits until walrelay committed the
	// Kafka transaction whose checkpoint covers it.
	committed := func(n int) pglogrepl.LSN {
		xid := e.ExecXid(t, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, 'agg-1', 'T', jsonb_build_object('n', $2::int))`, e.AggType(0), n)
		end := wit.CommitEnds(t)[xid]
		harness.WaitFor(t, time.Minute, fmt.Sprintf("walrelay to commit the checkpoint of event %d", n), func() bool {
			return relay.Metric("walrelay_checkpoint_lsn") >= float64(end)
		})
		return end
	}
	committed(1)
	abort := e2etest.OpenTransaction(t, e, e.Prefix+".other", cp)
	second := committed(2)
	relay.Kill()
	if slot := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN; slot != start {
		t.Fatalf("the slot moved from %s to %s although its status updates were dropped: the test proves nothing", start, slot)
	}

	relay = e.Start(t, args...)
	const waiting = "waiting for kafka transactions on checkpoint topic"
	var ready string
	harness.WaitFor(t, time.Minute, "walrelay to wait for the open transaction, or to confirm the second event", func() bool {
		_, ready = relay.Get("/readyz")
		return strings.Contains(ready, waiting) || e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= second
	})
	if !strings.Contains(ready, waiting) {
		t.Errorf("walrelay confirmed the second event while a transaction on %s was open, without waiting; /readyz: %s", cp, ready)
	} else {
		if v := relay.Metric("walrelay_checkpoint_read_waiting"); v != 1 {
			t.Errorf("walrelay_checkpoint_read_waiting = %v while /readyz says it waits, want 1", v)
		}
		if !strings.Contains(relay.Log(), waiting) {
			t.Errorf("the log does not say walrelay waits for the open transaction")
		}
	}
	abort()
	harness.WaitFor(t, time.Minute, "the slot to be confirmed past the second event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= second
	})
	recs, _ := e.Bed.ConsumeAllSettled(t, []string{topic}, 0)
	seen := map[string]int{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		seen[id]++
	}
	rows := e.CommittedRows(t)
	for id := range rows {
		if seen[id] != 1 {
			t.Errorf("event %s read %d times by a read_committed consumer, want once", id, seen[id])
		}
	}
	if len(recs) != len(rows) {
		t.Errorf("%d records for %d events", len(recs), len(rows))
	}
	if v, ok := relay.MetricOK("walrelay_checkpoint_read_waiting"); !ok || v != 0 {
		t.Errorf("walrelay_checkpoint_read_waiting = %v (present %v) after the transaction was aborted, want 0", v, ok)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
