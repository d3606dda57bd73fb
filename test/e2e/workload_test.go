package e2e

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// verdict is what checkRecords found.
type verdict struct {
	Lost, Phantom, Duplicates, OrderViolations, FormatErrors int
}

// checkRecords compares what Kafka holds with the committed rows: each row
// exactly once (or at least once when dupsAllowed), nothing else, per key in
// commit order, byte-exact topic, key, value, headers and partition.
func checkRecords(t *testing.T, e *env, recs []*kgo.Record, rows map[string]harness.OutboxRow, rolledBack map[string]bool, partitions int, dupsAllowed bool) verdict {
	t.Helper()
	var v verdict
	seen := map[string]int{}
	report := func(format string, args ...any) {
		if v.FormatErrors+v.Phantom+v.OrderViolations < 20 {
			t.Errorf(format, args...)
		}
	}
	byKey := map[string][]*kgo.Record{}
	tsByXid := map[float64]time.Time{}
	for _, r := range recs {
		id, ok := harness.Header(r, "id")
		if !ok {
			v.FormatErrors++
			report("record at %s[%d]@%d has no id header", r.Topic, r.Partition, r.Offset)
			continue
		}
		seen[id]++
		row, ok := rows[id]
		if !ok {
			v.Phantom++
			report("record %s at %s[%d]@%d was never committed (rolled back: %v)", id, r.Topic, r.Partition, r.Offset, rolledBack[id])
			continue
		}
		if seen[id] > 1 {
			v.Duplicates++
		}
		if want := "outbox.event." + row.AggType; r.Topic != want {
			v.FormatErrors++
			report("record %s: topic %q, want %q", id, r.Topic, want)
		}
		if string(r.Key) != row.AggID {
			v.FormatErrors++
			report("record %s: key %q, want %q", id, r.Key, row.AggID)
		}
		if row.Payload == nil && r.Value != nil || row.Payload != nil && string(r.Value) != *row.Payload {
			v.FormatErrors++
			report("record %s: value %q, want %v", id, r.Value, row.Payload)
		}
		if et, _ := harness.Header(r, "eventType"); et != row.Type || len(r.Headers) != 2 || r.Headers[0].Key != "id" {
			v.FormatErrors++
			report("record %s: headers %v, want id then eventType=%s", id, r.Headers, row.Type)
		}
		if want := javaPartition(r.Key, partitions); r.Partition != want {
			v.FormatErrors++
			report("record %s: partition %d, Kafka's murmur2 partitioner gives %d", id, r.Partition, want)
		}
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
		if row.Payload != nil {
			var p struct {
				Xid float64 `json:"xid"`
			}
			if json.Unmarshal(r.Value, &p) == nil && p.Xid != 0 {
				if ts, ok := tsByXid[p.Xid]; ok && !ts.Equal(r.Timestamp) {
					v.FormatErrors++
					report("record %s: timestamp %s differs from its transaction's %s", id, r.Timestamp, ts)
				}
				tsByXid[p.Xid] = r.Timestamp
			}
		}
	}
	for id := range rows {
		if seen[id] == 0 {
			v.Lost++
			if v.Lost <= 20 {
				t.Errorf("committed row %s never reached Kafka", id)
			}
		}
	}
	// Per key, the first occurrence of each event must follow commit order:
	// seq 1, 2, 3, ... (records of one key share a partition: offset order).
	for key, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		next := int64(1)
		for _, r := range rs {
			var p struct {
				Seq int64 `json:"seq"`
			}
			if err := json.Unmarshal(r.Value, &p); err != nil || p.Seq == 0 {
				continue
			}
			switch {
			case p.Seq == next:
				next++
			case p.Seq < next:
				// a duplicate of an earlier event
			default:
				v.OrderViolations++
				report("key %s: seq %d at offset %d before seq %d", key, p.Seq, r.Offset, next)
				next = p.Seq + 1
			}
		}
	}
	if !dupsAllowed && v.Duplicates > 0 {
		t.Errorf("%d duplicate records", v.Duplicates)
	}
	if v.Lost+v.Phantom+v.OrderViolations+v.FormatErrors > 0 {
		t.Errorf("lost %d, phantom %d, order violations %d, format errors %d", v.Lost, v.Phantom, v.OrderViolations, v.FormatErrors)
	}
	return v
}
