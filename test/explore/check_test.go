package explore

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/walrelay/walrelay/test/harness"
)

// checkRecords compares each record of a committed row with the row: its
// value, and the headers --header-columns maps.
func (x *explorer) checkRecords(recs []*kgo.Record, rows map[string]harness.ShapeRow) (corrupt, badHeaders int) {
	t := x.t
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		row, ok := rows[id]
		if !ok || row.Poison {
			continue // the checker counts it as a phantom
		}
		got := string(r.Value)
		if x.shape.PayloadType == "bytea" {
			got = hex.EncodeToString(r.Value)
		}
		switch {
		case row.Value == nil && r.Value != nil, row.Value != nil && *row.Value != got:
			corrupt++
			if corrupt <= 3 {
				t.Logf("wrong value: record %s at %s[%d]@%d: %q, the row's %v", id, r.Topic, r.Partition, r.Offset, trim(got), trimp(row.Value))
			}
		}
		typ, hasType := harness.Header(r, "eventType")
		seq, hasSeq := harness.Header(r, "seq")
		var ok2 bool
		switch x.c["headers"] {
		case "none":
			ok2 = !hasType && !hasSeq
		case "type":
			ok2 = typ == x.eventType && !hasSeq
		default:
			ok2 = typ == x.eventType && seq == strconv.FormatInt(row.Seq, 10)
		}
		if !ok2 {
			badHeaders++
			if badHeaders <= 3 {
				t.Logf("wrong headers: record %s: %v", id, r.Headers)
			}
		}
	}
	return corrupt, badHeaders
}

// checkDeadLetters counts poison rows without a dead-letter record, and
// dead-lettered rows that are not poison.
func checkDeadLetters(dlq []*kgo.Record, poison map[string]bool) (missing, unexpected int) {
	seen := map[string]bool{}
	for _, r := range dlq {
		id, _ := harness.Header(r, "walrelay.event.id")
		if !poison[id] && !seen[id] {
			unexpected++
		}
		seen[id] = true
	}
	for id := range poison {
		if !seen[id] {
			missing++
		}
	}
	return missing, unexpected
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func trimp(s *string) string {
	if s == nil {
		return "NULL"
	}
	return trim(*s)
}

// lastLine is the last line of log that contains marker, and the one after
// it (walrelay's refusals list their problems on the next lines).
func lastLine(log, marker string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], marker) {
			if i+1 < len(lines) {
				return lines[i] + " " + strings.TrimSpace(lines[i+1])
			}
			return lines[i]
		}
	}
	return "(no line with " + marker + ")"
}
