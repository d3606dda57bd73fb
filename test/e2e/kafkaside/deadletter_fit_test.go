package kafkaside

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestDeadLetterRecordAlwaysFits: poison events whose row is larger than
// --kafka-max-message-bytes (10000): a 20 KB aggregatetype (no topic can be
// named after it), and a 20 KB id and key beside a large payload. Each is
// dead-lettered in a record that fits, with its largest fields dropped
// and long values truncated (headers name them and their sizes); the
// events after them arrive and the slot passes them all.
func TestDeadLetterRecordAlwaysFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.LooseOutbox)
	dlq := e.Prefix + ".dlq"
	good := e.AggType(0)
	c := e.Collect(t)
	dc := e.DLQCollector(t, dlq)
	const limit = 10000
	relay := e.Start(t, "--dlq-topic", dlq, "--kafka-max-message-bytes", fmt.Sprint(limit))
	relay.WaitStreaming()

	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	ins := func(id, aggType, key, payload string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, $3, 'OrderCreated', $4::jsonb)`, id, aggType, key, payload); err != nil {
			t.Fatal(err)
		}
	}
	hugeType := e.Prefix + strings.Repeat("a", 20000)
	hugeID := strings.Repeat("i", 20000)
	hugeKey := strings.Repeat("k", 20000)
	typeID := harness.NewUUID()
	ins(harness.NewUUID(), good, "agg-1", `{"seq": 1}`)
	ins(typeID, hugeType, "agg-1", `{"case": "huge aggregatetype"}`)
	ins(harness.NewUUID(), good, "agg-1", `{"seq": 2}`)
	ins(hugeID, good, hugeKey, `{"case": "huge id and key", "pad": "`+strings.Repeat("p", 5000)+`"}`)
	ins(harness.NewUUID(), good, "agg-1", `{"seq": 3}`)
	after := e.Bed.CurrentWALLSN(t, e.DSN)

	recs := c.WaitFor(3, time.Minute)
	dead := dc.WaitFor(2, time.Minute)
	harness.WaitFor(t, time.Minute, "the slot to pass the poison events", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if want := []string{`{"seq": 1}`, `{"seq": 2}`, `{"seq": 3}`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q", got, want)
	}
	byClass := map[string]int{}
	for _, d := range dead {
		size := len(d.Key) + len(d.Value)
		for _, h := range d.Headers {
			size += len(h.Key) + len(h.Value)
		}
		if size > limit {
			t.Errorf("dead-letter record of %d bytes, over the limit %d", size, limit)
		}
		class, _ := harness.Header(d, "walrelay.error.class")
		byClass[class]++
		dropped, _ := harness.Header(d, "walrelay.dropped.column")
		sizes, _ := harness.Header(d, "walrelay.dropped.bytes")
		switch class {
		case "invalid_topic":
			if id, _ := harness.Header(d, "walrelay.event.id"); id != typeID {
				t.Errorf("invalid_topic: event id %q, want %s", id, typeID)
			}
			if !strings.Contains(","+dropped+",", ",aggregatetype,") || !strings.Contains(sizes, fmt.Sprint(len(hugeType))) {
				t.Errorf("invalid_topic: dropped %q (%q bytes), want aggregatetype of %d bytes named", dropped, sizes, len(hugeType))
			}
			if !strings.Contains(string(d.Value), `"case":"huge aggregatetype"`) {
				t.Errorf("invalid_topic: value %.200s lacks the fields that fit", d.Value)
			}
		case "too_large":
			for _, col := range []string{"payload", "id", "aggregateid"} {
				if !strings.Contains(","+dropped+",", ","+col+",") {
					t.Errorf("too_large: dropped columns %q do not name %s", dropped, col)
				}
			}
			if id, _ := harness.Header(d, "walrelay.event.id"); !strings.HasPrefix(hugeID, id) || id == "" {
				t.Errorf("too_large: event id header is not a prefix of the id (%d bytes)", len(id))
			}
			if tr, _ := harness.Header(d, "walrelay.truncated"); !strings.Contains(tr, "walrelay.event.id") || !strings.Contains(tr, "key") {
				t.Errorf("too_large: walrelay.truncated %q does not name the event id and key", tr)
			}
			if len(d.Key) == 0 || !strings.HasPrefix(hugeKey, string(d.Key)) {
				t.Errorf("too_large: key is not a prefix of the aggregate id (%d bytes)", len(d.Key))
			}
		default:
			t.Errorf("dead-letter record of class %q", class)
		}
	}
	if byClass["invalid_topic"] != 1 || byClass["too_large"] != 1 {
		t.Errorf("dead-letter classes %v, want one invalid_topic and one too_large", byClass)
	}
	if relay.Exited() {
		t.Fatalf("walrelay exited: %v", relay.Err())
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
