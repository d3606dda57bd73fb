package testbed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewReader is a consumer that reads records back as a user would: no
// group, every partition from its start, read_committed when committed
// (read_uncommitted otherwise), transaction markers kept (Attrs.IsControl)
// so that its position passes them, and topics created while it runs
// noticed within a second. opts (the topics, TLS, SASL) come last and win.
func NewReader(brokers []string, committed bool, opts ...kgo.Opt) (*kgo.Client, error) {
	// N.B. the transaction markers are kept so that the position passes
	// them: a partition may end with one (a producer's commit or abort),
	// and a consumer that skips it never reaches the end offset.
	base := []kgo.Opt{kgo.KeepControlRecords()}
	if committed {
		base = append(base, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	base = append(base,
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		// Notice topics created while consuming soon.
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	return kgo.NewClient(append(base, opts...)...)
}

// Ends holds an offset per topic and partition.
type Ends map[string]map[int32]int64

// ListEndOffsets lists through cl the end offset of every partition of
// topics: the high watermark, or with committed the last stable offset
// (where a read_committed consumer stops below an open transaction). A topic
// that does not exist is absent.
func ListEndOffsets(ctx context.Context, cl *kgo.Client, committed bool, topics ...string) (Ends, error) {
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		// N.B. the last stable offsets: a read_committed consumer stops
		// below an open transaction.
		list = adm.ListCommittedOffsets
	}
	listed, err := list(ctx, topics...)
	var shardErrs *kadm.ShardErrors
	if err != nil && !errors.As(err, &shardErrs) {
		return nil, fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	out := Ends{}
	var errs []error
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err))
		default:
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.Offset
		}
	})
	return out, errors.Join(errs...)
}

// ReadOptions says how far ReadToEnd reads.
type ReadOptions struct {
	// Committed reads with a read_committed consumer up to each
	// partition's last stable offset: records of aborted and open
	// transactions are not returned.
	Committed bool
	// Idle: once at the end offsets, return when no record has arrived
	// for Idle (0: at once).
	Idle time.Duration
	// Want: read on past the end offsets until at least Want records (not
	// counting transaction markers) were read (0: no such wait).
	Want int
}

// ReadToEnd reads topics from the beginning, all partitions, with a
// NewReader consumer and returns the records in per-partition offset order
// and, apart, the transaction markers it passed. It lists the end offsets
// first and reads at least up to them; topics that do not exist count as
// empty. When ctx ends first it returns what it read and an error that
// wraps ctx.Err() and says how far each partition is behind.
func ReadToEnd(ctx context.Context, brokers, topics []string, o ReadOptions) (recs, control []*kgo.Record, err error) {
	wait := 500 * time.Millisecond
	if o.Idle > 0 {
		wait = min(max(o.Idle/2, 10*time.Millisecond), wait)
	}
	cl, err := NewReader(brokers, o.Committed, kgo.ConsumeTopics(topics...), kgo.FetchMaxWait(wait))
	if err != nil {
		return nil, nil, fmt.Errorf("create kafka consumer: %w", err)
	}
	defer cl.Close()
	ends, err := ListEndOffsets(ctx, cl, o.Committed, topics...)
	if err != nil {
		return nil, nil, err
	}

	next := Ends{}
	behind := func() []string {
		var out []string
		for topic, ps := range ends {
			for p, end := range ps {
				if at := next[topic][p]; at < end {
					out = append(out, fmt.Sprintf("%s/%d at %d of %d", topic, p, at, end))
				}
			}
		}
		if len(recs) < o.Want {
			out = append(out, fmt.Sprintf("%d of %d records", len(recs), o.Want))
		}
		sort.Strings(out)
		return out
	}
	last := time.Now()
	for {
		caughtUp := len(behind()) == 0
		pctx, pcancel := ctx, context.CancelFunc(func() {})
		if caughtUp {
			if time.Since(last) >= o.Idle {
				return recs, control, nil
			}
			pctx, pcancel = context.WithDeadline(ctx, last.Add(o.Idle))
		}
		fetches := cl.PollFetches(pctx)
		pcancel()
		var ferr error
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
				errors.Is(err, kerr.UnknownTopicOrPartition) {
				return
			}
			ferr = cmp.Or(ferr, fmt.Errorf("consume %s/%d: %w", topic, partition, err))
		})
		if ferr != nil {
			return recs, control, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				control = append(control, r)
			} else {
				recs = append(recs, r)
			}
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]int64{}
			}
			next[r.Topic][r.Partition] = r.Offset + 1
			last = time.Now()
		})
		if ctx.Err() != nil {
			if b := behind(); len(b) > 0 {
				return recs, control, fmt.Errorf("read %v to the end: %s: %w", topics, strings.Join(b, ", "), ctx.Err())
			}
			return recs, control, nil
		}
	}
}
