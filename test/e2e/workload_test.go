package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
)

// verdict is what checkRecords found.
type verdict struct {
	Lost, Phantom, Duplicates, OrderViolations, FormatErrors int
}

// checkRecords compares what Kafka holds with the committed rows through
// harness.Check (each row exactly once, or at least once when dupsAllowed,
// nothing else, per key in commit order) and harness.CheckFormat
// (byte-exact topic, value, headers, the partition Kafka's murmur2
// partitioner gives, one timestamp per transaction).
func checkRecords(t *testing.T, e *env, recs []*kgo.Record, rows map[string]harness.OutboxRow, rolledBack map[string]bool, partitions int, dupsAllowed bool) verdict {
	t.Helper()
	rep := harness.Check(harness.History{Committed: harness.EventsOf(rows), Records: harness.FromKafka(recs), RolledBack: rolledBack})
	f := harness.CheckFormat(recs, rows, func(key []byte) int32 { return javaPartition(key, partitions) })
	v := verdict{Lost: rep.Lost, Phantom: rep.Phantom, Duplicates: rep.Duplicates, OrderViolations: rep.OrderViolations, FormatErrors: f.Errors}
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
