package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCheckFormat: records built by hand against two committed rows of one
// transaction; each case breaks one thing and must be the one error found.
func TestCheckFormat(t *testing.T) {
	t.Parallel()
	payload := `{"seq": 1}`
	rows := map[string]OutboxRow{
		"e1": {ID: "e1", AggType: "order", AggID: "k1", Type: "OrderCreated", Payload: &payload, Xid: 7},
		"e2": {ID: "e2", AggType: "order", AggID: "k2", Type: "OrderPaid", Xid: 7}, // NULL payload
	}
	at := time.Unix(1700000000, 0)
	good := func() []*kgo.Record {
		return []*kgo.Record{
			{Topic: "outbox.event.order", Key: []byte("k1"), Value: []byte(`{"seq": 1}`), Partition: 1, Timestamp: at,
				Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}, {Key: "eventType", Value: []byte("OrderCreated")}}},
			{Topic: "outbox.event.order", Key: []byte("k2"), Partition: 2, Timestamp: at,
				Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e2")}, {Key: "eventType", Value: []byte("OrderPaid")}}},
		}
	}
	partitionOf := func(key []byte) int32 { return int32(key[1] - '0') } // k1 -> 1, k2 -> 2
	cases := []struct {
		name    string
		breakIt func(rs []*kgo.Record)
		problem string // "" for no error
	}{
		{"as committed", func([]*kgo.Record) {}, ""},
		{"topic", func(rs []*kgo.Record) { rs[0].Topic = "outbox.event.Order" }, `topic "outbox.event.Order"`},
		{"value", func(rs []*kgo.Record) { rs[0].Value = []byte(`{"seq":1}`) }, "value"},
		{"value missing", func(rs []*kgo.Record) { rs[0].Value = nil }, "value"},
		{"value for a NULL payload", func(rs []*kgo.Record) { rs[1].Value = []byte("null") }, "the payload is NULL"},
		{"header order", func(rs []*kgo.Record) { h := rs[0].Headers; h[0], h[1] = h[1], h[0] }, "want id then eventType=OrderCreated"},
		{"extra header", func(rs []*kgo.Record) { rs[0].Headers = append(rs[0].Headers, kgo.RecordHeader{Key: "x"}) }, "headers"},
		{"event type", func(rs []*kgo.Record) { rs[1].Headers[1].Value = []byte("OrderCreated") }, "eventType=OrderPaid"},
		{"partition", func(rs []*kgo.Record) { rs[1].Partition = 0 }, "partition 0, want 2"},
		{"timestamps within a transaction", func(rs []*kgo.Record) { rs[1].Timestamp = at.Add(time.Millisecond) }, "xid 7"},
		{"a record of no committed row is not a format error", func(rs []*kgo.Record) {
			rs[0].Headers[0].Value = []byte("zz")
			rs[0].Topic = "elsewhere"
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := good()
			c.breakIt(rs)
			got := CheckFormat(rs, rows, partitionOf)
			want := 0
			if c.problem != "" {
				want = 1
			}
			if got.Errors != want || len(got.Problems) != want {
				t.Fatalf("errors %d %q, want %d", got.Errors, got.Problems, want)
			}
			if want == 1 && !strings.Contains(got.Problems[0], c.problem) {
				t.Errorf("problem %q, want it to mention %q", got.Problems[0], c.problem)
			}
		})
	}
	// Without partitionOf the partition is not checked.
	rs := good()
	rs[1].Partition = 0
	if got := CheckFormat(rs, rows, nil); got.Errors != 0 {
		t.Errorf("partition checked without partitionOf: %q", got.Problems)
	}
}

// TestCheckEventsWithoutSeq: an event with Seq 0 has no place in its key's
// order; it neither breaks nor is broken by the order of the others.
func TestCheckEventsWithoutSeq(t *testing.T) {
	t.Parallel()
	h := History{Committed: []Event{
		{ID: "a1", Key: "a", Seq: 1}, {ID: "a0", Key: "a"}, {ID: "a2", Key: "a", Seq: 2},
	}}
	h.Records = []Record{rec("a1", "a", 0), rec("a2", "a", 1), rec("a0", "a", 2)}
	if got := Check(h); !got.OK() || got.OrderViolations != 0 {
		t.Errorf("Check: %s", got.Summary())
	}
	h.Records = []Record{rec("a2", "a", 0), rec("a0", "a", 1), rec("a1", "a", 2)}
	if got := Check(h); got.OrderViolations != 1 {
		t.Errorf("Check of a2 before a1: %s, want one order violation", got.Summary())
	}
}
