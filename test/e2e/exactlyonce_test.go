package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// eosHistory reads back e's topics and checkpoint topic with a
// read_committed consumer to the last stable offsets, once the slot
// confirmed every committed event, and judges them: each event exactly
// once, and every PostgreSQL transaction whole in one Kafka transaction
// with its checkpoint.
func eosHistory(t *testing.T, e *harness.Env, wit *harness.Witness, w *harness.Workload) (harness.Report, harness.TxReport) {
	t.Helper()
	events, err := harness.Events(e.CommittedRows(t), wit.CommitEnds(t))
	if err != nil {
		t.Fatal(err)
	}
	var last pglogrepl.LSN
	for _, ev := range events {
		last = max(last, ev.CommitEnd)
	}
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("walrelay to confirm the last commit (%s)", last), func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= last
	})
	all, control := e.Bed.ConsumeAllSettled(t, append(e.Topics(), e.CheckpointTopic()), time.Second)
	var data []*kgo.Record
	for _, r := range all {
		if r.Topic != e.CheckpointTopic() {
			data = append(data, r)
		}
	}
	rep := harness.Check(harness.History{Committed: events, Records: harness.FromKafka(data), RolledBack: w.RolledBack()})
	txr := harness.CheckTransactions(all, e.CheckpointTopic(), e.CheckpointKey(t), events)
	t.Logf("RESULT %s %s %s markers=%d", t.Name(), rep, txr, len(control))
	if !rep.OK() || rep.Duplicates != 0 {
		t.Errorf("read_committed consumer: %s (want lost, phantom, order violations and duplicates 0)", rep.Summary())
	}
	if !txr.OK() {
		t.Errorf("transactions: %s\n  %s", txr, strings.Join(txr.Problems, "\n  "))
	}
	if txr.KafkaTxns < 2 {
		t.Errorf("%d kafka transactions with records: the test wants several", txr.KafkaTxns)
	}
	return rep, txr
}

// TestExactlyOnce: --exactly-once under a workload with rollbacks and a
// graceful restart midway: a read_committed consumer reads every committed
// event exactly once, each PostgreSQL transaction whole in one Kafka
// transaction with its checkpoint; the slot is confirmed to the last
// commit.
func TestExactlyOnce(t *testing.T) {
	e := harness.NewEnv(t, relayBin)
	e.ExactlyOnce()
	wit := harness.NewWitness(t, e)
	w := &harness.Workload{Writers: 3, Aggregates: 100, MaxTxRows: 10, Rollback: 0.1, Business: 0.3, Pause: time.Millisecond}
	w.Prepare(t, e)
	relay := restartMidway(t, e, w, 3000)
	_, txr := eosHistory(t, e, wit, w)
	if !strings.Contains(relay.Log(), `"exactly-once: checkpoint read`) {
		t.Errorf("walrelay's log has no checkpoint line")
	}
	committed := relay.Metric(`walrelay_kafka_transactions_total{outcome="committed"}`)
	if committed < 1 || committed > float64(txr.KafkaTxns) {
		t.Errorf("walrelay_kafka_transactions_total{outcome=\"committed\"} = %v, want 1 to the %d kafka transactions a consumer reads", committed, txr.KafkaTxns)
	}
	if lag, cp := relay.Metric("walrelay_checkpoint_lag_bytes"), relay.Metric("walrelay_checkpoint_lsn"); cp == 0 || lag != 0 {
		t.Errorf("walrelay_checkpoint_lsn %v, walrelay_checkpoint_lag_bytes %v once idle; want a position and 0", cp, lag)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// restartMidway starts walrelay and w (with no Events: until stopped),
// stops walrelay gracefully once n events are committed and it committed a
// Kafka transaction, starts a second walrelay, and stops the writers once
// that one has published n events; it returns the second walrelay.
//
// N.B. midway means after the first walrelay committed a Kafka
// transaction, with the writers still at work: its first start on a
// cluster waits for Kafka to create the transaction log, and a stop before
// it ends, or writers done by then, leave the whole workload to one
// walrelay ("1 kafka transactions with records: the test wants several").
func restartMidway(t *testing.T, e *harness.Env, w *harness.Workload, n int) *relayProc {
	t.Helper()
	relay := e.StartRelay(t)
	relay.WaitStreaming()
	writing := w.Start(e)
	first := &relayProc{Relay: relay, T: t}
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d events, and a kafka transaction committed", n), func() bool {
		c, _ := first.MetricOK(`walrelay_kafka_transactions_total{outcome="committed"}`)
		return w.Committed() >= int64(n) && c >= 1
	})
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	second := &relayProc{Relay: e.StartRelay(t), T: t}
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d events published by the second walrelay", n), func() bool {
		p, _ := second.MetricOK("walrelay_events_published_total")
		return p >= float64(n)
	})
	if err := writing.Stop(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	return second
}

// TestExactlyOnceSkipsWhatCheckpointCovers: walrelay's status updates
// never reach PostgreSQL (a proxy drops them), so the slot stays where it
// was while Kafka transactions commit; walrelay is killed, and a second
// walrelay starts from the old slot position. It must produce nothing the
// checkpoint covers: each event once. At-least-once would send every event
// again.
func TestExactlyOnceSkipsWhatCheckpointCovers(t *testing.T) {
	e := harness.NewEnv(t, relayBin)
	e.ExactlyOnce()
	wit := harness.NewWitness(t, e)
	w := &harness.Workload{Writers: 2, Events: 3000, Aggregates: 50, MaxTxRows: 5, Pause: time.Millisecond}
	w.Prepare(t, e)
	proxy := harness.NewPGProxy(t, harness.PGHostPort(t, e.DSN))
	proxy.Drop(harness.PGStatusUpdate)
	relay := e.StartRelay(t, "--pg-url", harness.DSNVia(t, e.DSN, proxy.Addr(), nil))
	relay.WaitStreaming()
	before := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN
	if err := w.Run(t.Context(), e); err != nil {
		t.Fatalf("writers: %v", err)
	}
	// Every event is in a committed Kafka transaction: read_committed
	// shows them all, while the slot has not moved.
	harness.WaitFor(t, time.Minute, "the events in committed kafka transactions", func() bool {
		recs, _ := e.Bed.ConsumeAllCommitted(t, e.Topics(), 0)
		return len(recs) >= int(w.Committed())
	})
	relay.Kill()
	if now := e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN; now != before {
		t.Fatalf("the slot moved from %s to %s although its status updates were dropped: the test proves nothing", before, now)
	}
	relay = e.StartRelay(t)
	eosHistory(t, e, wit, w)
	if !strings.Contains(relay.Log(), `"exactly-once: skipping the transactions the checkpoint covers"`) {
		t.Errorf("the second walrelay logged no skipped transactions")
	}
	if n := (&relayProc{Relay: relay, T: t}).Metric("walrelay_transactions_skipped_total"); n < 1 {
		t.Errorf("walrelay_transactions_skipped_total = %v, want the transactions the checkpoint covered", n)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// TestExactlyOnceDeadLetterInTransaction: a PostgreSQL transaction with a
// poison row between two good ones: the dead-letter record is written in
// the same Kafka transaction as the good records and the checkpoint (one
// producer id and epoch, Kafka 4 bumping the epoch per transaction), and
// a read_committed consumer reads each once.
func TestExactlyOnceDeadLetterInTransaction(t *testing.T) {
	e := harness.NewEnv(t, relayBin)
	e.Bed.Exec(t, e.DSN, e2etest.LooseOutbox)
	e.ExactlyOnce()
	dlq := e.Prefix + ".dlq"
	relay := e.StartRelay(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	good1, poison, good2 := harness.NewUUID(), harness.NewUUID(), harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $4, 'a1', 'T', '{"seq": 1}'), ($2, $4, NULL, 'T', '{}'), ($3, $4, 'a1', 'T', '{"seq": 2}')`,
		good1, poison, good2, e.AggType(0))
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	topics := append(e.Topics(), dlq, e.CheckpointTopic())
	harness.WaitFor(t, time.Minute, "walrelay to confirm the transaction", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	recs, _ := e.Bed.ConsumeAllSettled(t, topics, time.Second)
	key := e.CheckpointKey(t)
	type txnID struct {
		pid   int64
		epoch int16
	}
	byID := map[string]txnID{}
	var checkpoints []txnID
	for _, r := range recs {
		id := txnID{r.ProducerID, r.ProducerEpoch}
		if r.Topic == e.CheckpointTopic() && strings.HasPrefix(string(r.Key), "marker/") {
			continue // N.B. the slot's marker (package kafkastate) is written outside transactions
		}
		if !r.Attrs.IsTransactional() {
			t.Errorf("record at %s[%d]@%d was not written in a transaction", r.Topic, r.Partition, r.Offset)
		}
		switch r.Topic {
		case e.CheckpointTopic():
			if string(r.Key) == key {
				checkpoints = append(checkpoints, id)
			}
		case dlq:
			ev, _ := harness.Header(r, "walrelay.event.id")
			byID["dead:"+ev] = id
		default:
			ev, _ := harness.Header(r, "id")
			byID[ev] = id
		}
	}
	t.Logf("RESULT %s records=%d transactions=%v checkpoints=%v", t.Name(), len(recs), byID, checkpoints)
	want, ok := byID[good1]
	if !ok || len(byID) != 3 || byID[good2] != want || byID["dead:"+poison] != want {
		t.Errorf("want the two good records and the dead letter of %s once each in one kafka transaction, got %v", poison, byID)
	}
	if len(checkpoints) != 1 || checkpoints[0] != want {
		t.Errorf("want one checkpoint in the records' kafka transaction %v, got %v", want, checkpoints)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
