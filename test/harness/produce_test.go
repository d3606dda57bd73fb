package harness

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestParseProduceRequest: produce requests framed by franz-go's own
// encoder, with topic names (v9, flexible) and topic ids (v13), give back
// the batches' producer id, epoch, first sequence and record count.
func TestParseProduceRequest(t *testing.T) {
	batch := func(pid int64, epoch int16, seq, n int32) []byte {
		rb := kmsg.RecordBatch{Length: 49, Magic: 2, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: n, Records: []byte{}}
		return rb.AppendTo(nil)
	}
	id := [16]byte{1, 2, 3}
	for _, c := range []struct {
		version  int16
		clientID string
		want     []ProducedBatch
	}{
		{3, "walrelay", []ProducedBatch{{Topic: "orders", Partition: 2, ProducerID: 7, ProducerEpoch: 1, FirstSequence: 40, Records: 3}}},
		{9, "walrelay", []ProducedBatch{
			{Topic: "orders", Partition: 2, ProducerID: 7, ProducerEpoch: 1, FirstSequence: 40, Records: 3},
			{Topic: "orders", Partition: 0, ProducerID: 7, ProducerEpoch: 1, FirstSequence: 0, Records: 1},
		}},
		{13, "", []ProducedBatch{{TopicID: id, Partition: 1, ProducerID: 9, ProducerEpoch: 0, FirstSequence: 5, Records: 2}}},
	} {
		req := kmsg.NewPtrProduceRequest()
		req.Version = c.version
		req.Acks = -1
		for _, b := range c.want {
			topic := kmsg.ProduceRequestTopic{Topic: b.Topic, TopicID: b.TopicID}
			topic.Partitions = append(topic.Partitions, kmsg.ProduceRequestTopicPartition{Partition: b.Partition, Records: batch(b.ProducerID, b.ProducerEpoch, b.FirstSequence, b.Records)})
			req.Topics = append(req.Topics, topic)
		}
		var opts []kmsg.RequestFormatterOpt
		if c.clientID != "" {
			opts = append(opts, kmsg.FormatterClientID(c.clientID))
		}
		msg := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, 42)
		got, err := ParseProduceRequest(msg)
		if err != nil {
			t.Fatalf("v%d: %v", c.version, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("v%d: %d batches %+v, want %+v", c.version, len(got), got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("v%d batch %d = %+v, want %+v", c.version, i, got[i], c.want[i])
			}
		}
	}
	if _, err := ParseProduceRequest([]byte{0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0, 0}); err == nil {
		t.Errorf("a metadata request parsed as a produce request")
	}
}
