package kafkastate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Reading a shared topic up to its last stable offsets. The last stable
// offset of a partition is the first offset of its oldest undecided
// transaction: any producer's, not only this pipeline's. On a topic that
// several pipelines write in transactions (the checkpoint topic is one
// partition for every slot by default), another pipeline's open
// transaction holds it below the records this pipeline committed after
// that transaction began; and a broker writes a transaction's commit
// markers after the commit returned. A read to the last stable offsets
// listed at once can so miss the newest committed checkpoint, and a
// pipeline that restarts from an older one produces again what it had
// committed.

// settleWait is how often settledEnds lists the last stable offsets again.
const settleWait = 20 * time.Millisecond

// settledEnds lists topic's high watermarks, then its last stable offsets
// until each partition's reaches its high watermark as first listed:
// every transaction with a record on the topic then is decided (its
// marker written), so a read_committed read up to the offsets it returns
// sees every record committed before it was called. Once it has waited a
// second, it tells wait what holds it, each time it lists,
// and "" when that has passed; it fails when ctx ends.
func settledEnds(ctx context.Context, adm *kadm.Client, topic string, wait func(undecided string)) (kadm.ListedOffsets, error) {
	high, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = high.Error()
	}
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	told := false
	for {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			return nil, err
		}
		open := strings.Join(undecided(high, stable), ", ")
		if open == "" {
			if told {
				wait("")
			}
			return stable, nil
		}
		if time.Since(begin) >= time.Second {
			told = true
			wait(open)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafka transactions on topic %s still undecided (%s): %w", topic, open, ctx.Err())
		case <-time.After(settleWait):
		}
	}
}

// undecided names the partitions whose last stable offset lies below
// their high watermark in high.
func undecided(high, stable kadm.ListedOffsets) []string {
	var open []string
	high.Each(func(h kadm.ListedOffset) {
		if s, ok := stable.Lookup(h.Topic, h.Partition); !ok || s.Offset < h.Offset {
			at := int64(-1)
			if ok {
				at = s.Offset
			}
			open = append(open, fmt.Sprintf("%s/%d stable at %d of %d", h.Topic, h.Partition, at, h.Offset))
		}
	})
	sort.Strings(open)
	return open
}
