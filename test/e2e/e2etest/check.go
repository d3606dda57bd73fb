package e2etest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// Verdict is what CheckRecords found.
type Verdict struct {
	Lost, Phantom, Duplicates, OrderViolations, FormatErrors int
}

// CheckRecords compares what Kafka holds with the committed rows through
// harness.Check (each row exactly once, or at least once when dupsAllowed,
// nothing else, per key in commit order) and harness.CheckFormat
// (byte-exact topic, value, headers, the partition Kafka's Murmur2
// partitioner gives, one timestamp per transaction).
func CheckRecords(t *testing.T, e *Env, recs []*kgo.Record, rows map[string]harness.OutboxRow, rolledBack map[string]bool, partitions int, dupsAllowed bool) Verdict {
	t.Helper()
	rep := harness.Check(harness.History{Committed: harness.EventsOf(rows), Records: harness.FromKafka(recs), RolledBack: rolledBack})
	f := harness.CheckFormat(recs, rows, func(key []byte) int32 { return JavaPartition(key, partitions) })
	v := Verdict{Lost: rep.Lost, Phantom: rep.Phantom, Duplicates: rep.Duplicates, OrderViolations: rep.OrderViolations, FormatErrors: f.Errors}
	if v.Lost+v.Phantom+v.OrderViolations+v.FormatErrors > 0 || !dupsAllowed && v.Duplicates > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "records read back: %s format_errors=%d", rep.String(), f.Errors)
		for _, p := range append(rep.Problems, f.Problems...) {
			b.WriteString("\n  ")
			b.WriteString(p)
		}
		t.Error(b.String())
	}
	return v
}
