package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
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
		// N.B. checkPartition made sure the topic had the partition when
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

// checkPartition returns an error wrapping decode.ErrBadValue when the
// event's partition is not one of its topic's; the topic is described
// again first, in case partitions were added since it was checked.
// N.B. Debezium's Connect producer fails its task at such a record
// ("Invalid partition given with record"); here it is a poison event:
// dead-lettered, or it halts the relay (--on-poison).
func (s *Sink) checkPartition(ctx context.Context, ev *decode.Event) (poison, err error) {
	if ev.Partition < s.partitions[ev.Topic] {
		return nil, nil
	}
	// N.B. a topic just created may be missing from the metadata, or
	// without partitions, for a moment: asked again a few times.
	var d kadm.TopicDetail
	for try := 1; ; try++ {
		details, err := s.adm.ListTopics(ctx, ev.Topic)
		if err != nil {
			return nil, fmt.Errorf("list topic %s: %w", ev.Topic, err)
		}
		var ok bool
		d, ok = details[ev.Topic]
		if ok && d.Err == nil && len(d.Partitions) > 0 {
			break
		}
		if try >= 20 {
			return nil, fmt.Errorf("describe topic %s: %w", ev.Topic, errors.Join(errors.New("topic has no partitions in the metadata"), d.Err))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	n := int32(len(d.Partitions))
	s.partitions[ev.Topic] = n
	if ev.Partition >= n {
		return fmt.Errorf("%w: partition column gives partition %d, and topic %s has %d partitions (0 to %d)", decode.ErrBadValue, ev.Partition, ev.Topic, n, n-1), nil
	}
	return nil, nil
}
