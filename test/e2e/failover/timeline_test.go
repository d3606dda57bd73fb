package failover

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestExactlyOnceFailoverToLaggingStandbyLosesNothing: --exactly-once on a
// PostgreSQL 17 primary whose standby is asynchronous (no
// synchronized_standby_slots). The standby is stopped, so it falls behind;
// walrelay publishes and checkpoints what the primary commits after that
// (checkpoint C, past what the standby has, S). The primary is killed and
// the standby promoted: its new timeline writes new transactions at LSNs
// between S and C. walrelay must relay them: their LSNs are on another
// timeline than the checkpoint's, and only the shared history up to where
// the checkpoint's timeline ended is covered. Every row of the promoted
// server's outbox is in Kafka (read_committed, to the end offsets),
// exactly once; the rows committed on the old primary after the standby
// stopped were lost with its WAL: they are in Kafka but in no table.
func TestExactlyOnceFailoverToLaggingStandbyLosesNothing(t *testing.T) {
	t.Parallel()
	pair := testbed.StartPGPair(t, "17", testbed.Asynchronous())
	e := failoverEnv(t, pair)
	eos := []string{"--exactly-once", "--checkpoint-topic", e.CheckpointTopic()}
	standbyURL := pair.StandbyURL("failover")
	primaryURL := pair.PrimaryURL("failover")
	first := &harness.Workload{Writers: 1, Events: 50, Aggregates: 10, MaxTxRows: 3, Pause: time.Millisecond}
	first.Prepare(t, e.Env)
	relay := e.Start(t, eos...)
	relay.WaitStreaming()
	if err := first.Run(t.Context(), e.Env); err != nil {
		t.Fatalf("writers: %v", err)
	}
	harness.WaitFor(t, time.Minute, "walrelay to confirm the first events on the primary", func() bool {
		return e.Bed.Slot(t, primaryURL, e.Slot).ConfirmedFlushLSN >= e.Bed.CurrentWALLSN(t, primaryURL)
	})
	harness.WaitFor(t, 2*time.Minute, "the slot to be synchronized to the standby", func() bool {
		ready, _ := standbySlot(t, e, standbyURL)
		return ready
	})
	pair.WaitReplayed(t)
	pair.StopStandby(t)
	standbyHas := e.Bed.CurrentWALLSN(t, primaryURL) // S: no more than this reached the standby

	// The standby is gone: what the primary commits now is on its timeline
	// only. Large payloads, so that the WAL walrelay checkpoints reaches
	// well past the standby's.
	before := e.CommittedRows(t)
	behind := &harness.Workload{Writers: 1, Events: 300, Aggregates: 10, MaxTxRows: 3, Pad: 2000}
	if err := behind.Run(t.Context(), e.Env); err != nil {
		t.Fatalf("writers on the primary without its standby: %v", err)
	}
	vanished := map[string]bool{} // committed only on the old primary's timeline
	for id := range e.CommittedRows(t) {
		if _, ok := before[id]; !ok {
			vanished[id] = true
		}
	}
	end := e.Bed.CurrentWALLSN(t, primaryURL)
	harness.WaitFor(t, time.Minute, "walrelay to confirm the events the standby does not have", func() bool {
		return e.Bed.Slot(t, primaryURL, e.Slot).ConfirmedFlushLSN >= end
	})
	// N.B. in exactly-once mode the slot is confirmed only after the
	// Kafka transaction (with its checkpoint) committed: read_committed
	// shows every row once the broker wrote the commit's markers
	// (settled), and the last checkpoint lies past the standby.
	recs, _ := e.Bed.ConsumeAllSettled(t, e.Topics(), 0)
	inKafka := map[string]bool{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		inKafka[id] = true
	}
	for id := range vanished {
		if !inKafka[id] {
			t.Fatalf("event %s committed on the primary while its standby was stopped is not in Kafka (read_committed) although the slot is confirmed past it", id)
		}
	}
	checkpoint, oldTLI := lastCheckpoint(t, e)
	if checkpoint <= standbyHas {
		t.Fatalf("walrelay's checkpoint %s is not past the standby's WAL %s: the test proves nothing", checkpoint, standbyHas)
	}

	pair.KillPrimary(t)
	pair.StartStandby(t)
	pair.Promote(t)
	var tli int
	if err := e.Bed.QueryRow(t, standbyURL, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`).Scan(&tli); err != nil {
		t.Fatal(err)
	}
	if tli < 2 {
		t.Fatalf("the promoted server writes timeline %d: not a new timeline", tli)
	}
	// The new primary's own transactions, at LSNs walrelay's checkpoint
	// (on the old timeline) covers.
	after := &harness.Workload{Writers: 1, Events: 40, Aggregates: 10, MaxTxRows: 3}
	if err := after.Run(t.Context(), e.Env); err != nil {
		t.Fatalf("writers on the promoted standby: %v", err)
	}
	newEnd := e.Bed.CurrentWALLSN(t, e.DSN)
	if newEnd > checkpoint {
		t.Fatalf("the promoted server's last commit %s lies past walrelay's checkpoint %s: the test proves nothing (commit more on the old primary while the standby is stopped)", newEnd, checkpoint)
	}
	harness.WaitFor(t, time.Minute, "the slot on the promoted server to be confirmed past its last commit", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= newEnd
	})
	if relay.Exited() {
		t.Fatalf("walrelay exited after the failover: %v", relay.Err())
	}
	// The checkpoints name the timeline their LSNs belong to.
	if newCP, newTLI := lastCheckpoint(t, e); oldTLI != 1 || newTLI != tli || newCP <= standbyHas {
		t.Errorf("checkpoints: %s on timeline %d before the failover, %s on timeline %d after it; want timeline 1, then timeline %d past the standby's WAL %s",
			checkpoint, oldTLI, newCP, newTLI, tli, standbyHas)
	}

	rows := e.CommittedRows(t)
	for id := range vanished {
		if _, ok := rows[id]; ok {
			t.Fatalf("event %s committed while the standby was stopped is on the promoted server: the standby was not behind", id)
		}
	}
	all, _ := e.Bed.ConsumeAllSettled(t, e.Topics(), time.Second)
	// N.B. the records of the lost timeline's rows are in Kafka and in no
	// table: not phantoms of walrelay's making (the set comes from what
	// the test committed, not from walrelay).
	var kept []*kgo.Record
	for _, r := range all {
		if id, _ := harness.Header(r, "id"); !vanished[id] {
			kept = append(kept, r)
		}
	}
	v := e2etest.CheckRecords(t, e, kept, rows, nil, 3, false)
	t.Logf("FIGURES pg=%s timeline=%d events_promoted=%d vanished=%d records=%d duplicates=%d standby_wal=%s checkpoint=%s promoted_last_commit=%s",
		pair.Standby.Version, tli, len(rows), len(vanished), len(all), v.Duplicates, standbyHas, checkpoint, newEnd)
	if !strings.Contains(relay.Log(), `"exactly-once: the checkpoint's timeline ended before the checkpoint`) {
		t.Errorf("walrelay did not log the bound of the checkpoint on the new timeline; log:\n%s", relay.Log())
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// lastCheckpoint reads e's last committed checkpoint (read_committed): the
// end LSN and the timeline it names.
func lastCheckpoint(t *testing.T, e *env) (pglogrepl.LSN, int) {
	t.Helper()
	recs, _ := e.Bed.ConsumeAllSettled(t, []string{e.CheckpointTopic()}, 0)
	key := e.CheckpointKey(t)
	var last pglogrepl.LSN
	var tli int
	for _, r := range recs {
		if string(r.Key) != key {
			continue
		}
		var v struct {
			EndLSN   string `json:"end_lsn"`
			Timeline int    `json:"timeline"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("checkpoint record at offset %d: %v", r.Offset, err)
		}
		lsn, err := pglogrepl.ParseLSN(v.EndLSN)
		if err != nil {
			t.Fatalf("checkpoint record at offset %d: %v", r.Offset, err)
		}
		last, tli = lsn, v.Timeline
	}
	if last == 0 {
		t.Fatalf("no checkpoint of key %s on %s", key, e.CheckpointTopic())
	}
	return last, tli
}
