package rig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

// ErrTimeout is wrapped by waits that ran out of time (proc's, so that one
// errors.Is covers the rig's waits and the processes').
var ErrTimeout = proc.ErrTimeout

// Admin is a Kafka admin client.
type Admin struct {
	cl *kgo.Client
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
	return &Admin{cl: cl}, nil
}

// Close closes the client.
func (a *Admin) Close() { a.cl.Close() }

// CreateTopics creates topics with partitions partitions (replication
// factor 1), deleting them first if they exist (testbed.RecreateTopics),
// and waits until every partition has a leader.
func (a *Admin) CreateTopics(ctx context.Context, partitions int32, configs map[string]*string, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return testbed.RecreateTopics(ctx, a.cl, partitions, configs, topics...)
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
	ends, err := testbed.ListEndOffsets(ctx, a.cl, false, topics...)
	if err != nil {
		return 0, err
	}
	var n int64
	var errs []error
	for _, t := range topics {
		if ends[t] == nil {
			errs = append(errs, fmt.Errorf("end offsets of %s: %w", t, kerr.UnknownTopicOrPartition))
		}
		for _, o := range ends[t] {
			n += o
		}
	}
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

// ReadAll consumes topics from the start, to their end offsets and until
// want records are read, or until timeout passes (an error wrapping
// ErrTimeout), and returns the records read (testbed.ReadToEnd).
func ReadAll(ctx context.Context, brokers []string, want int, timeout time.Duration, topics ...string) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, _, err := testbed.ReadToEnd(ctx, brokers, topics, testbed.ReadOptions{Want: want})
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("read %d of %d records from %v: %w", len(out), want, topics, ErrTimeout)
	}
	return out, err
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
// longer lists them (testbed.DeleteTopics).
func (a *Admin) DeleteTopics(ctx context.Context, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return testbed.DeleteTopics(ctx, a.cl, topics...)
}
