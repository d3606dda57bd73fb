package sink

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decode"
)

// Events with a partition of their own (the router's partition placement)
// go to it, whatever their key hashes to; a partition the topic lacks is a
// poison event (Debezium's Connect producer fails its task there); a
// timestamp of its own replaces the commit time.
func TestExplicitPartitionAndTimestamp(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute, func(c *sinkSetup) { c.TopicPartitions = 6 })
	ctx := context.Background()
	stamp := time.UnixMilli(1796137445123)
	var evs []decode.Event
	for p := int32(0); p < 6; p++ {
		ev := event("placed", "same-key", "id-"+string(rune('a'+p)))
		ev.Partition, ev.HasPartition, ev.Timestamp = p, true, stamp
		evs = append(evs, ev)
	}
	bad := event("placed", "same-key", "id-out-of-range")
	bad.Partition, bad.HasPartition = 6, true
	hashed := event("placed", "same-key", "id-hashed")
	evs = append(evs, bad, hashed)
	if err := s.Produce(ctx, tx(1, start+100, evs...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != start+100 {
		t.Errorf("watermark %s, want %s", got, start+100)
	}
	recs := readAll(t, c, "placed", 7)
	hashedPart := int32(-1)
	for _, r := range recs {
		id := header(r, "id")
		if id == "id-hashed" {
			hashedPart = r.Partition
			if !r.Timestamp.Equal(time.Unix(1700000000, 0)) {
				t.Errorf("hashed record's timestamp %v, want the commit time", r.Timestamp)
			}
			continue
		}
		if want := int32(id[3] - 'a'); r.Partition != want {
			t.Errorf("record %s in partition %d, want %d", id, r.Partition, want)
		}
		if !r.Timestamp.Equal(stamp) {
			t.Errorf("record %s timestamp %v, want %v", id, r.Timestamp, stamp)
		}
	}
	if hashedPart < 0 {
		t.Fatal("no record id-hashed")
	}
	dl := readAll(t, c, s.cfg.DeadLetterTopic, 1)
	if got := header(dl[0], HeaderErrorClass); got != "bad_value" {
		t.Errorf("dead letter class %q, want bad_value", got)
	}
}
