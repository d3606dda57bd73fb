package harness

import (
	"bytes"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FormatReport is CheckFormat's verdict.
type FormatReport struct {
	Errors   int      // records of committed rows that differ from them
	Problems []string // the first of them
}

// CheckFormat compares each record of a committed row (by its id header)
// with the row, byte for byte: topic outbox.event.<aggregatetype>, value the
// payload (none for a NULL payload), headers exactly id then
// eventType=<type>, the partition partitionOf gives for the key (not
// checked when it is nil), and one timestamp for all records of a
// transaction (the row's xmin). Records without a committed row, and keys,
// are Check's business.
func CheckFormat(recs []*kgo.Record, rows map[string]OutboxRow, partitionOf func(key []byte) int32) FormatReport {
	var rep FormatReport
	problem := func(format string, args ...any) {
		rep.Errors++
		if len(rep.Problems) < maxProblems {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		}
	}
	txTime := map[uint32]time.Time{}
	for _, r := range recs {
		id, _ := Header(r, "id")
		row, ok := rows[id]
		if !ok {
			continue
		}
		at := fmt.Sprintf("record %s at %s[%d]@%d", id, r.Topic, r.Partition, r.Offset)
		if want := "outbox.event." + row.AggType; r.Topic != want {
			problem("%s: topic %q, want %q", at, r.Topic, want)
		}
		switch {
		case row.Payload == nil && r.Value != nil:
			problem("%s: value %.100q, want none (the payload is NULL)", at, r.Value)
		case row.Payload != nil && (r.Value == nil || !bytes.Equal(r.Value, []byte(*row.Payload))):
			problem("%s: value %.100q, want %.100q", at, r.Value, *row.Payload)
		}
		if len(r.Headers) != 2 || r.Headers[0].Key != "id" || r.Headers[1].Key != "eventType" || string(r.Headers[1].Value) != row.Type {
			problem("%s: headers %s, want id then eventType=%s", at, headerList(r), row.Type)
		}
		if partitionOf != nil {
			if want := partitionOf(r.Key); r.Partition != want {
				problem("%s: partition %d, want %d for key %q", at, r.Partition, want, r.Key)
			}
		}
		if ts, ok := txTime[row.Xid]; ok && !ts.Equal(r.Timestamp) {
			problem("%s: timestamp %s, another record of its transaction (xid %d) has %s", at, r.Timestamp.UTC().Format(time.RFC3339Nano), row.Xid, ts.UTC().Format(time.RFC3339Nano))
		} else if !ok {
			txTime[row.Xid] = r.Timestamp
		}
	}
	return rep
}

func headerList(r *kgo.Record) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, h := range r.Headers {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%q", h.Key, h.Value)
	}
	b.WriteByte(']')
	return b.String()
}
