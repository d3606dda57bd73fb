package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/walrelay/walrelay/kafkastate"
)

// redriven reports whether the state topic records dead letter l as
// re-published on its own: a record of its partition and offset naming
// its event (an older walrelay's record names none, and counts).
//
// N.B. the event matters: a dead-letter topic deleted and made again
// starts its offsets anew, and the dead letter now at a recorded offset
// is another event, not re-published yet.
func (v *View) redriven(dlq string, l Letter) bool {
	red, ok := v.Redriven[kafkastate.RedrivenKey(dlq, l.Partition, l.Offset)]
	return ok && (red.EventID == "" || red.EventID == l.EventID)
}

// stale is the state topic keys of Redriven records of dead-letter topic
// dlq that name a dead letter the topic no longer holds: before its
// partition's first offset (past its retention), another event at that
// offset, or none there (the topic made anew). Sorted. Nothing while the
// topic is not there: a topic Kafka does not list for a moment must not
// make redrive forget what it did.
func (v *View) stale(dlq string) []string {
	if len(v.Starts) == 0 {
		return nil
	}
	held := make(map[[2]int64]string, len(v.Letters))
	for _, l := range v.Letters {
		held[[2]int64{int64(l.Partition), l.Offset}] = l.EventID
	}
	prefix := kafkastate.RedrivenPrefix + dlq + "/"
	var out []string
	for k, red := range v.Redriven {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		id, ok := held[[2]int64{int64(red.Partition), red.Offset}]
		if ok && (red.EventID == "" || id == red.EventID) {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// forgetStale writes a tombstone on the state topic for each stale
// Redriven record of the dead-letter topic (View.stale), so that the
// state topic's compaction removes what no dead letter needs any more, and
// says how many.
func (t *Tool) forgetStale(ctx context.Context, v *View) error {
	keys := v.stale(t.cfg.DeadLetterTopic)
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if err := t.cl.ProduceSync(ctx, kafkastate.RedrivenTombstone(t.cfg.StateTopic, k)).FirstErr(); err != nil {
			return fmt.Errorf("forget the record %s on %s: %w", k, t.cfg.StateTopic, err)
		}
		delete(v.Redriven, k)
	}
	fmt.Fprintf(t.out, "forgot %d records of re-published dead letters that %s no longer holds (past its retention, or the topic made anew)\n", len(keys), t.cfg.DeadLetterTopic)
	return nil
}

// startOffsets is topic's first offset per partition; none for a topic
// that does not exist.
func (t *Tool) startOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	starts, err := kadm.NewClient(t.cl).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return map[int32]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list first offsets of topic %s: %w", topic, err)
	}
	out := map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}
