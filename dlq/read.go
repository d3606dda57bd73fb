package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/kafkastate"
)

// View is what the dead-letter and state topics hold, read once.
type View struct {
	Letters []Letter              // in topic order (partition, offset)
	Parks   *kafkastate.ParkState // every slot's aggregates
	Acks    map[string]kafkastate.Ack
	// Redriven holds the records of the dead letters re-published on
	// their own, by state topic key (kafkastate.RedrivenKey).
	Redriven map[string]kafkastate.Redriven
	// Starts is the dead-letter topic's first offset per partition: what
	// is before it is past its retention.
	Starts map[int32]int64
	At     time.Time // when it was read
}

// readTimeout bounds reading a topic to its end.
const readTimeout = 2 * time.Minute

// scan reads the dead-letter topic and the state topic.
func (t *Tool) scan(ctx context.Context) (*View, error) {
	v := &View{Parks: &kafkastate.ParkState{}, Acks: map[string]kafkastate.Ack{}, Redriven: map[string]kafkastate.Redriven{}, Starts: map[int32]int64{}, At: time.Now()}
	err := t.readTopic(ctx, t.cfg.DeadLetterTopic, func(r *kgo.Record) {
		v.Letters = append(v.Letters, decodeLetter(r))
	})
	if err != nil {
		return nil, err
	}
	if v.Starts, err = t.startOffsets(ctx, t.cfg.DeadLetterTopic); err != nil {
		return nil, err
	}
	var aerr error
	err = t.readTopic(ctx, t.cfg.StateTopic, func(r *kgo.Record) {
		if _, err := v.Parks.Apply(r); err != nil {
			aerr = errors.Join(aerr, err)
		}
		if a, ok := kafkastate.DecodeAck(r); ok {
			v.Acks[a.ID()] = a
		}
		if k, red, ok, tombstone := kafkastate.DecodeRedriven(r); ok {
			if tombstone {
				delete(v.Redriven, k)
			} else {
				v.Redriven[k] = red
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return v, aerr
}

// readTopic hands every record of topic to fn, read_committed, from the
// first offsets up to the last stable offsets listed first. A missing
// topic holds nothing.
func (t *Tool) readTopic(ctx context.Context, topic string, fn func(*kgo.Record)) error {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	adm := kadm.NewClient(t.cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list offsets of topic %s: %w", topic, err)
	}
	// N.B. a partition whose records are all past the topic's retention
	// (or compacted away) has a first offset at its end: nothing to read,
	// and a read from its start would wait for a record that never comes.
	starts, err := t.startOffsets(ctx, topic)
	if err != nil {
		return err
	}
	want := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > starts[o.Partition] {
			want[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().At(starts[o.Partition])
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(t.opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// N.B. control records are kept so that the position reaches
		// the last stable offset, which may be a commit marker.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("consumer of topic %s: %w", topic, err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	for {
		done := true
		for p, end := range want {
			done = done && next[p] >= end
		}
		if done {
			return nil
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read topic %s to its end: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return fmt.Errorf("read topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && r.Offset < want[r.Partition] {
				fn(r)
			}
		})
	}
}
