package inbox

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client error paths only, on kfake (the database is the bed's): what
// Kafka answers here is hard to make a real broker answer on cue.

func fakeCluster(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func fakeProduce(t *testing.T, c *kfake.Cluster, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestCommitFailureRedelivers: an offset commit the coordinator refuses is
// counted, not fatal; the records come again and are skipped as
// duplicates, never applied twice.
func TestCommitFailureRedelivers(t *testing.T) {
	f := newFixture(t, 1)
	fc := fakeCluster(t, f.topic)
	var refused atomic.Int32
	fc.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		refused.Add(1)
		return resp, nil, true
	})
	fakeProduce(t, fc, f.topic, rec("a", "id-1", 1), rec("a", "id-2", 2))
	cfg := f.config(record)
	cfg.Brokers = fc.ListenAddrs()
	a := start(t, cfg)
	waitFor(t, "the records applied", func() bool { return a.c.Stats().Applied == 2 })
	a.Stop(t) // its final commit (no records since) is not attempted
	if s := a.c.Stats(); s.CommitErrors != 1 || refused.Load() != 1 {
		t.Fatalf("stats %+v, %d commits refused; want 1 commit error", s, refused.Load())
	}
	// The next member of the group finds no committed offset: it reads
	// both again, and skips them.
	b := start(t, cfg)
	waitFor(t, "the records again", func() bool { return b.c.Stats().Duplicates == 2 })
	b.Stop(t)
	if s := b.c.Stats(); s.Applied != 0 || s.CommitErrors != 0 {
		t.Errorf("second member: %+v, want 2 duplicates only", s)
	}
	if n := f.count(t, `SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}

// TestDeadLetterTooLargeDropsValue: the dead-letter topic refuses the
// record as too large; it is produced again without its value, which the
// headers name and size.
func TestDeadLetterTooLargeDropsValue(t *testing.T) {
	f := newFixture(t, 1)
	fc := fakeCluster(t, f.topic)
	dlq := f.group + ".dlq"
	big := make([]byte, 4096)
	for i := range big {
		big[i] = 'x'
	}
	fakeProduce(t, fc, f.topic, &kgo.Record{Key: []byte("a"), Value: big}) // no id: dead-lettered
	var refused atomic.Int32
	fc.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		// N.B. installed after the test's own produce: the consumer
		// produces only dead letters. (Produce v13 names topics by id.)
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = r.Topics[0].Topic, r.Topics[0].TopicID
		for _, rp := range r.Topics[0].Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.MessageTooLarge.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		refused.Add(1)
		return resp, nil, true
	})
	cfg := f.config(record)
	cfg.Brokers = fc.ListenAddrs()
	a := start(t, cfg)
	waitFor(t, "the record dead-lettered", func() bool { return a.c.Stats().DeadLettered == 1 })
	a.Stop(t)
	if refused.Load() != 1 {
		t.Fatalf("%d dead-letter produces refused, want 1", refused.Load())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(fc.ListenAddrs()...), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollRecords(ctx, 10)
	recs := fs.Records()
	if len(recs) != 1 {
		t.Fatalf("%d dead-letter records (%v), want 1", len(recs), fs.Err0())
	}
	got := map[string]string{}
	for _, h := range recs[0].Headers {
		got[h.Key] = string(h.Value)
	}
	if recs[0].Value != nil || got[HeaderDropped] != "value" || got[HeaderDroppedBytes] != strconv.Itoa(len(big)) || got[HeaderErrorClass] != ClassMissingID {
		t.Errorf("dead letter value %d bytes, headers %v; want no value, dropped value of %d bytes, class %s", len(recs[0].Value), got, len(big), ClassMissingID)
	}
}
