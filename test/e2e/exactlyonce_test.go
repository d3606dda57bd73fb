package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

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
	all, control := e.Bed.ConsumeAllCommitted(t, append(e.Topics(), e.CheckpointTopic()), time.Second)
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
	w := &harness.Workload{Writers: 3, Events: 6000, Aggregates: 100, MaxTxRows: 10, Rollback: 0.1, Business: 0.3, Pause: time.Millisecond}
	w.Prepare(t, e)
	relay := e.StartRelay(t)
	relay.WaitStreaming()
	writing := w.Start(e)
	harness.WaitFor(t, time.Minute, "half of the events", func() bool { return w.Committed() >= 3000 })
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("walrelay exit code %d after SIGTERM, want 0", code)
	}
	relay = e.StartRelay(t)
	if err := writing.Wait(); err != nil {
		t.Fatalf("writers: %v", err)
	}
	eosHistory(t, e, wit, w)
	if !strings.Contains(relay.Log(), `"exactly-once: checkpoint read`) {
		t.Errorf("walrelay's log has no checkpoint line")
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
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
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}
