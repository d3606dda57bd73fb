package e2etest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// RecoveredHeader is the header walrelay puts on the records a recovery
// or a backfill published from the outbox table (docs/recovery.md).
const RecoveredHeader = "walrelay.recovered"

// CheckRecovered compares what Kafka holds with the committed rows, read
// from the table by the caller, through harness.Check (each row at least
// once, nothing else, per key in commit order), and checks each record
// carrying RecoveredHeader: its value is kind, and its key, value and
// eventType header are its row's. It returns the verdict and how many
// records carry the header.
func CheckRecovered(t *testing.T, recs []*kgo.Record, rows map[string]harness.OutboxRow, rolledBack map[string]bool, kind string) (Verdict, int) {
	t.Helper()
	rep := harness.Check(harness.History{Committed: harness.EventsOf(rows), Records: harness.FromKafka(recs), RolledBack: rolledBack})
	v := Verdict{Lost: rep.Lost, Phantom: rep.Phantom, Duplicates: rep.Duplicates, OrderViolations: rep.OrderViolations}
	var problems []string
	recovered := 0
	for _, r := range recs {
		h, ok := harness.Header(r, RecoveredHeader)
		if !ok {
			continue
		}
		recovered++
		id, _ := harness.Header(r, "id")
		row, found := rows[id]
		typ, _ := harness.Header(r, "eventType")
		switch {
		case h != kind:
			problems = append(problems, fmt.Sprintf("record %s: %s: %q, want %q", id, RecoveredHeader, h, kind))
		case !found:
		case string(r.Key) != row.AggID || row.Payload == nil || string(r.Value) != *row.Payload || typ != row.Type:
			problems = append(problems, fmt.Sprintf("record %s: key %q value %q eventType %q, want its row's %q %v %q", id, r.Key, r.Value, typ, row.AggID, row.Payload, row.Type))
		}
	}
	v.FormatErrors = len(problems)
	if v.Lost+v.Phantom+v.OrderViolations+v.FormatErrors > 0 {
		t.Errorf("records read back: %s recovered_format_errors=%d\n  %s", rep.String(), len(problems), strings.Join(append(rep.Problems, problems...), "\n  "))
	}
	return v, recovered
}

// CreatedAtDDL adds the column the recovery tests select and order rows
// by: set when the row is inserted, after the workload's per-aggregate
// lock (agg_seq) is taken, so an aggregate's rows have it in commit order.
const CreatedAtDDL = `ALTER TABLE outbox ADD COLUMN created_at timestamptz NOT NULL DEFAULT clock_timestamp()`

// WaitMarkerCommitTime waits until the slot's marker on the default state
// topic (walrelay.checkpoints) records the commit time of its confirmed
// position, which recovery selects rows by, and returns the marker's JSON.
func WaitMarkerCommitTime(t *testing.T, e *Env, timeout time.Duration) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.KafkaBrokers()...), kgo.ConsumeTopics("walrelay.checkpoints"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	suffix := "/" + e.Slot
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		var found string
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Key), "marker/") && strings.HasSuffix(string(r.Key), suffix) && strings.Contains(string(r.Value), `"confirmed_commit_time"`) {
				found = string(r.Value)
			}
		})
		if found != "" {
			return found
		}
	}
	t.Fatalf("the marker of slot %s recorded no commit time within %s", e.Slot, timeout)
	return ""
}

// WithoutFailoverLosses returns recs without the records of transactions
// the failover itself lost: records whose id is in neither rows (the
// promoted server's table) nor rolledBack, stamped (their commit time)
// before dead, a moment when the old primary had died (taken after
// testbed.PGPair.KillPrimary returned). walrelay decodes a commit from the
// primary's WAL whether or not an asynchronous standby received it yet, so
// such a record is not a phantom walrelay made; one stamped after the
// primary's death would be, and stays for the checker. It returns how many
// it left out.
//
// N.B. not a moment taken before KillPrimary: the writers go on
// committing on the old primary until the kill ends, and what they commit
// meanwhile may reach walrelay and not the standby. With such a moment,
// TestRecoverOrdersByCommitTimestamp counted 7 phantoms in a make test
// (three beds and a suite beside them).
func WithoutFailoverLosses(recs []*kgo.Record, rows map[string]harness.OutboxRow, rolledBack map[string]bool, dead time.Time) ([]*kgo.Record, int) {
	kept := recs[:0:0]
	lost := 0
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		if _, ok := rows[id]; !ok && !rolledBack[id] && r.Timestamp.Before(dead) {
			lost++
			continue
		}
		kept = append(kept, r)
	}
	return kept, lost
}
