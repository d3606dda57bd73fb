package rig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/test/proc"
)

// ErrTimeout is wrapped by waits that ran out of time (proc's, so that one
// errors.Is covers the rig's waits and the processes').
var ErrTimeout = proc.ErrTimeout

// Admin is a Kafka admin client.
type Admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// NewAdmin connects to brokers.
func NewAdmin(brokers []string) (*Admin, error) {
	// N.B. a short metadata age: kgo caches the metadata of a sharded
	// request (ListOffsets) for MetadataMinAge, so with the default 5 s the
	// end offsets of a topic walrelay creates mid-drain stayed unknown for
	// 5 s after it appeared, and the drain was timed 5 s or more.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RetryTimeout(30*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &Admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (a *Admin) Close() { a.cl.Close() }

// CreateTopics creates topics with partitions partitions (replication
// factor 1), deleting them first if they exist (DeleteTopics), and waits
// until the broker serves their metadata.
func (a *Admin) CreateTopics(ctx context.Context, partitions int32, configs map[string]*string, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := a.DeleteTopics(ctx, topics...); err != nil {
		return err
	}
	for {
		resp, err := a.adm.CreateTopics(ctx, partitions, 1, configs, topics...)
		if err != nil {
			return fmt.Errorf("create topics: %w", err)
		}
		retry := false
		for _, r := range resp.Sorted() {
			if errors.Is(r.Err, kerr.TopicAlreadyExists) {
				retry = true // a deletion still in progress
			} else if r.Err != nil {
				return fmt.Errorf("create topic %s: %w (%s)", r.Topic, r.Err, r.ErrMessage)
			}
		}
		if !retry {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create topics: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for {
		md, err := a.adm.ListTopics(ctx, topics...)
		ok := err == nil
		for _, t := range topics {
			d, found := md[t]
			ok = ok && found && d.Err == nil && len(d.Partitions) == int(partitions)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for topics: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// EndOffsets sums the end offsets (high watermarks) of every partition of
// topics: the records they hold when they started empty.
func (a *Admin) EndOffsets(ctx context.Context, topics ...string) (int64, error) {
	// N.B. a topic this client saw deleted (DeleteTopics) and another
	// client created since stays unknown in its metadata cache for a while:
	// refreshed and asked again, for up to 10 s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := a.endOffsets(ctx, topics...)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) || ctx.Err() != nil {
			return n, err
		}
		a.cl.ForceMetadataRefresh()
		time.Sleep(200 * time.Millisecond)
	}
}

func (a *Admin) endOffsets(ctx context.Context, topics ...string) (int64, error) {
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, err
	}
	var n int64
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, o.Err)
			return
		}
		n += o.Offset
	})
	return n, errors.Join(errs...)
}

// WarmUp produces n records of size bytes (lz4, acks from all replicas) to
// topic, created with partitions partitions, and deletes it: the broker's
// produce path is then compiled by its JIT before the first measured relay,
// not during it.
func (a *Admin) WarmUp(ctx context.Context, brokers []string, topic string, partitions int32, n, size int) error {
	if err := a.CreateTopics(ctx, partitions, nil, topic); err != nil {
		return err
	}
	defer a.DeleteTopics(context.WithoutCancel(ctx), topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var mu sync.Mutex
	var first error
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 10000)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return fmt.Errorf("warm up the broker: %w", first)
	}
	return nil
}

// ReadAll consumes topics from the start until want records are read or
// timeout passes, and returns the records read.
func ReadAll(ctx context.Context, brokers []string, want int, timeout time.Duration, topics ...string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(32<<20))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %d of %d records from %v: %w", len(out), want, topics, ErrTimeout)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err) })
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out, nil
}

// TopicRecords sums the end offsets of every partition of topic, asking
// each broker once (a Metadata request, then ListOffsets on each leader;
// no retries, no cached metadata, so that a poll loop sees a topic the
// moment its leaders hold the records). ok is false while the topic or a
// partition is not there yet.
func (a *Admin) TopicRecords(ctx context.Context, topic string) (n int64, ok bool, err error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, a.cl)
	if err != nil {
		return 0, false, err
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 || len(mresp.Topics[0].Partitions) == 0 {
		return 0, false, nil
	}
	byLeader := map[int32]*kmsg.ListOffsetsRequest{}
	for _, mp := range mresp.Topics[0].Partitions {
		if mp.ErrorCode != 0 || mp.Leader < 0 {
			return 0, false, nil
		}
		req := byLeader[mp.Leader]
		if req == nil {
			req = kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			byLeader[mp.Leader] = req
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = mp.Partition, -1, -1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	for leader, req := range byLeader {
		kresp, err := a.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return 0, false, err
		}
		for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return 0, false, nil
				}
				n += p.Offset
			}
		}
	}
	return n, true, nil
}

// DeleteTopics deletes topics if they exist and waits until the broker no
// longer lists them.
func (a *Admin) DeleteTopics(ctx context.Context, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := a.adm.DeleteTopics(ctx, topics...); err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	for {
		md, err := a.adm.ListTopics(ctx, topics...)
		gone := err == nil
		for _, t := range topics {
			if d, found := md[t]; found && d.Err == nil {
				gone = false
			}
		}
		if gone {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for topics to go: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
