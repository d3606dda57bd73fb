package kafkastate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// index is what a Store has read of its topic: every key's last value and,
// per partition, the offset read up to. A read catches up from there to the
// end offsets, not from the topic's start. N.B. a compacted topic keeps
// every record of its active segment (every marker refresh of every slot,
// until the segment rolls: a week, or 1 GiB, by default): read from the
// start at every check, a relay that restarts often, or a process of many
// pipelines, would read it again and again.
type index struct {
	mu      sync.Mutex // held across a catch-up: one reader at a time
	next    map[int32]int64
	markers map[string][]byte // by key; a tombstone deletes
	// records counts the records applied, for the tests.
	records int
}

// catchUp reads the topic from where the index stands to its end offsets
// now, applying every record's key and value in offset order within a
// partition (control records skipped). The caller holds s.idx.mu.
func (s *Store) catchUp(ctx context.Context) error {
	ends, err := s.endOffsets(ctx)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", s.cfg.Topic, err)
	}
	x := &s.idx
	// N.B. an end offset below what was read: the topic was deleted and
	// created again; everything is read again.
	ends.Each(func(o kadm.ListedOffset) {
		if x.next != nil && o.Offset < x.next[o.Partition] {
			s.log.Info("the marker topic's end offset went back: reading it again from the start",
				zap.String("topic", s.cfg.Topic), zap.Int32("partition", o.Partition), zap.Int64("end", o.Offset), zap.Int64("read_to", x.next[o.Partition]))
			x.next, x.markers = nil, nil
		}
	})
	if x.next == nil {
		x.next, x.markers = map[int32]int64{}, map[string][]byte{}
	}
	want := map[int32]int64{}
	offsets := map[string]map[int32]kgo.Offset{s.cfg.Topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if from := x.next[o.Partition]; o.Offset > from {
			want[o.Partition] = o.Offset
			offsets[s.cfg.Topic][o.Partition] = kgo.NewOffset().At(from)
		}
	})
	if len(want) == 0 {
		return nil
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ConsumePartitions(offsets),
		// N.B. transaction markers (the exactly-once checkpoints share the
		// topic) take offsets too: kept, so the end offset is reached.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, s.cfg.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create marker reader: %w", err)
	}
	defer cl.Close()
	for len(want) > 0 {
		// N.B. compaction may remove a partition's last offsets (a
		// tombstone past delete.retention.ms): a poll that gets nothing for
		// several fetch waits means nothing is left below the end offsets,
		// which the broker serves at once.
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read markers: %w", err)
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = errors.Join(ferr, err)
			}
		})
		if ferr != nil {
			return fmt.Errorf("read markers: %w", ferr)
		}
		if fetches.NumRecords() == 0 {
			break
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			switch {
			case !ok:
				return // read to its end already
			case r.Offset >= end:
				// N.B. past the end offset listed (the next catch-up's):
				// what was below it is read, or compacted away.
				x.next[r.Partition] = end
				delete(want, r.Partition)
				return
			}
			if !r.Attrs.IsControl() {
				x.records++
				if r.Value == nil {
					delete(x.markers, string(r.Key))
				} else {
					// N.B. a copy: the record's value shares the fetch's
					// buffer, which it would keep alive.
					x.markers[string(r.Key)] = bytes.Clone(r.Value)
				}
			}
			x.next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	for p, end := range want {
		x.next[p] = end
	}
	return nil
}
