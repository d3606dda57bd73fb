package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitioner is Kafka's key hash (murmur2, as a Java producer) except for
// a record whose partition the event named (decode.Event.HasPartition,
// the router's column:partition placement): explicitPartition marks it.
type partitioner struct{ kgo.Partitioner }

// explicitPartition encodes partition p in a record's Partition field
// before it is produced: -(p+1), never a partition the client could give.
// N.B. the client sets Partition to the partition it picks, once, before
// the record is buffered, so the encoding is gone once produced; every
// other record is produced with Partition 0 and hashed by its key.
func explicitPartition(p int32) int32 { return -p - 1 }

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	return &topicPartitioner{TopicPartitioner: p.Partitioner.ForTopic(t)}
}

// topicPartitioner is one topic's partitioner. The client calls it under
// a lock of its own (the partitioner's state is guarded by it).
type topicPartitioner struct {
	kgo.TopicPartitioner
	// last is the record last given its explicit partition, pick that
	// partition: the client partitions a record a second time after
	// OnNewBatch, when its Partition holds the first pick already.
	last *kgo.Record
	pick int
}

func (t *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition < 0 || r == t.last || t.TopicPartitioner.RequiresConsistency(r)
}

func (t *topicPartitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case r.Partition < 0:
		// N.B. admission made sure the topic had the partition when
		// it was produced; a topic shrunk meanwhile fails the record in
		// the client, which stops the relay (a broker would too).
		t.last, t.pick = r, int(-r.Partition-1)
		return t.pick
	case r == t.last:
		// N.B. partitioned again after OnNewBatch: r.Partition is the
		// first pick now, not the encoding.
		return t.pick
	}
	t.last = nil // N.B. not holding a record's bytes longer
	return t.TopicPartitioner.Partition(r, n)
}

// OnNewBatch passes the client's new-batch signal on (the sticky key
// partitioner uses it for records without a key).
func (t *topicPartitioner) OnNewBatch() {
	if o, ok := t.TopicPartitioner.(kgo.TopicPartitionerOnNewBatch); ok {
		o.OnNewBatch()
	}
}

// recountPartitions describes topic again and stores its partition count,
// when an event names a partition the topic did not have (admit's
// recount): partitions may have been added since it was checked.
func (s *Sink) recountPartitions(ctx context.Context, topic string) error {
	// N.B. a topic just created may be missing from the metadata, or
	// without partitions, for a moment: asked again a few times.
	var d kadm.TopicDetail
	for try := 1; ; try++ {
		details, err := s.adm.ListTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("list topic %s: %w", topic, err)
		}
		var ok bool
		d, ok = details[topic]
		if ok && d.Err == nil && len(d.Partitions) > 0 {
			break
		}
		if try >= 20 {
			return fmt.Errorf("describe topic %s: %w", topic, errors.Join(errors.New("topic has no partitions in the metadata"), d.Err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.partitions[topic] = int32(len(d.Partitions))
	return nil
}
