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
	"github.com/twmb/franz-go/pkg/kmsg"
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
// that does not exist (the broker answers UNKNOWN_TOPIC_OR_PARTITION for it)
// is absent; a topic that exists is there with every partition, or the
// listing fails: a partition whose offset no broker gave (no leader yet, a
// request that failed, the client's metadata behind the broker's) is listed
// again until ctx ends, never left out. Authorization errors end it at once.
func ListEndOffsets(ctx context.Context, cl *kgo.Client, committed bool, topics ...string) (Ends, error) {
	for {
		ends, retry, err := listEndOffsets(ctx, cl, committed, topics...)
		if err == nil || !retry {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (listing until %w)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
			cl.ForceMetadataRefresh()
		}
	}
}

// listEndOffsets is one listing of ListEndOffsets; retry says whether its
// error may pass.
func listEndOffsets(ctx context.Context, cl *kgo.Client, committed bool, topics ...string) (Ends, bool, error) {
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		// N.B. the last stable offsets: a read_committed consumer stops
		// below an open transaction.
		list = adm.ListCommittedOffsets
	}
	// N.B. the partitions each topic has, to tell one that no answer
	// listed from one that does not exist.
	tds, err := adm.ListTopics(Uncached(ctx), topics...)
	if err != nil {
		return nil, retriable(err), fmt.Errorf("list partitions of %v: %w", topics, err)
	}
	listed, err := list(ctx, topics...)
	var shardErrs *kadm.ShardErrors
	if err != nil && !errors.As(err, &shardErrs) {
		return nil, retriable(err), fmt.Errorf("list end offsets of %v: %w", topics, err)
	}
	out := Ends{}
	var errs []error
	retry := true
	if shardErrs != nil {
		// N.B. a failed shard's partitions are missing from listed: taken
		// for absent, a topic that holds records would read as empty.
		for _, se := range shardErrs.Errs {
			errs = append(errs, fmt.Errorf("end offsets not listed (%s): %w", shardPartitions(se.Req), se.Err))
			retry = retry && retriable(se.Err)
		}
	}
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Partition == -1 && errors.Is(o.Err, kerr.UnknownTopicOrPartition):
			// The broker does not know the topic: absent.
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err))
			retry = retry && retriable(o.Err)
		default:
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.Offset
		}
	})
	if shardErrs == nil && len(errs) == 0 {
		for _, td := range tds.Sorted() {
			for _, p := range td.Partitions.Sorted() {
				if _, ok := out[td.Topic][p.Partition]; td.Err == nil && !ok {
					errs = append(errs, fmt.Errorf("end offset of %s/%d: not in the broker's answer", td.Topic, p.Partition))
				}
			}
		}
	}
	return out, retry, errors.Join(errs...)
}

// retriable says whether a listing that failed with err may succeed when
// asked again: anything but a refusal (authorization, a bad request).
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.UnknownTopicOrPartition)
	}
	var ae *kadm.AuthError
	return !errors.As(err, &ae)
}

// shardPartitions names the partitions of a ListOffsets request shard.
func shardPartitions(req kmsg.Request) string {
	r, ok := req.(*kmsg.ListOffsetsRequest)
	if !ok {
		return "a request"
	}
	var out []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
		}
	}
	return strings.Join(out, " ")
}

// ReadOptions says how far ReadToEnd reads.
type ReadOptions struct {
	// Committed reads with a read_committed consumer up to each
	// partition's last stable offset: records of aborted and open
	// transactions are not returned.
	Committed bool
	// Settled, with Committed: first wait until every transaction with
	// records below the high watermarks as listed at the start is
	// decided, then read to the last stable offsets. N.B. a broker
	// writes a transaction's commit markers after its EndTxn returned,
	// so a relay may confirm a transaction (and the slot show it) before
	// its records are visible to read_committed: a read right after the
	// confirmation needs Settled. A transaction left open keeps the read
	// waiting until ctx ends.
	Settled bool
	// Idle: once at the end offsets, return when no record has arrived
	// for Idle (0: at once).
	Idle time.Duration
	// Want: read on past the end offsets until at least Want records (not
	// counting transaction markers) were read (0: no such wait).
	Want int
	// Exist: every topic must exist (it holds records the caller
	// expects): one the broker does not know is listed again until it
	// is, and ReadToEnd fails when ctx ends first; never counted empty.
	Exist bool
	// Absent, if set, is told each topic ReadToEnd counted empty because
	// the broker did not know it, at the start and again at the end.
	Absent func(topic string)
}

// ReadToEnd reads topics from the beginning, all partitions, with a
// NewReader consumer and returns the records in per-partition offset order
// and, apart, the transaction markers it passed. It lists the end offsets
// first and reads at least up to them: a partition whose end offset cannot
// be listed is listed again (ListEndOffsets), never taken for empty. A
// topic that does not exist counts as empty (o.Absent is told) unless
// o.Exist; one unknown at the start is listed again once the others are
// read, and read to its end if it exists by then. When ctx ends first it
// returns what it read and an error that wraps ctx.Err() and says how far
// each partition is behind.
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
	for o.Exist && len(absent(ends, topics)) > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			cl.ForceMetadataRefresh()
			again, err := ListEndOffsets(ctx, cl, o.Committed, topics...)
			if err == nil {
				ends = again
				continue
			}
			if ctx.Err() == nil {
				return nil, nil, err
			}
			// N.B. a listing cut short by ctx says nothing new: the last
			// one that answered did not know the topics.
		}
		return nil, nil, fmt.Errorf("read %v: the broker does not know %v: nothing read from it: %w", topics, absent(ends, topics), ctx.Err())
	}
	if o.Committed && o.Settled {
		if ends, err = settle(ctx, cl, topics); err != nil {
			return nil, nil, err
		}
	}
	relisted := len(absent(ends, topics)) == 0

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
		if caughtUp && !relisted {
			// N.B. a topic the first listing did not know may have been
			// created since, or known to the broker but not yet to its
			// metadata: listed again before it is counted empty.
			relisted = true
			more, err := ListEndOffsets(ctx, cl, o.Committed, absent(ends, topics)...)
			if err != nil {
				return recs, control, err
			}
			for topic, ps := range more {
				ends[topic] = ps
			}
			continue
		}
		if caughtUp {
			if time.Since(last) >= o.Idle {
				if o.Absent != nil {
					for _, topic := range absent(ends, topics) {
						o.Absent(topic)
					}
				}
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

// settle waits until the last stable offset of every partition of topics
// reaches its high watermark as listed first (every transaction with
// records there decided: its marker written), and returns the last
// stable offsets it then lists.
func settle(ctx context.Context, cl *kgo.Client, topics []string) (Ends, error) {
	high, err := ListEndOffsets(ctx, cl, false, topics...)
	if err != nil {
		return nil, err
	}
	var open []string
	for {
		stable, err := ListEndOffsets(ctx, cl, true, topics...)
		if err != nil {
			if len(open) > 0 {
				return nil, fmt.Errorf("read %v: transactions still undecided (%s): %w", topics, strings.Join(open, ", "), err)
			}
			return nil, err
		}
		open = open[:0]
		for topic, ps := range high {
			for p, hw := range ps {
				if at := stable[topic][p]; at < hw {
					open = append(open, fmt.Sprintf("%s/%d stable at %d of %d", topic, p, at, hw))
				}
			}
		}
		if len(open) == 0 {
			return stable, nil
		}
		sort.Strings(open)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %v: transactions still undecided (%s): %w", topics, strings.Join(open, ", "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// absent is the topics of topics that ends lacks.
func absent(ends Ends, topics []string) []string {
	var out []string
	for _, t := range topics {
		if _, ok := ends[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}
