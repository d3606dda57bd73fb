package kafkaside

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// firstRecordProbe notes, when the client buffers the first record of a
// topic, whether every partition of the topic answers on its leader at that
// moment: a Metadata request, then one ListOffsets request per leader, each
// sent once to one broker through a client of its own (no retries, no
// cache), so that the broker's own answer is what is seen.
type firstRecordProbe struct {
	cl *kgo.Client

	mu     sync.Mutex
	seen   map[string]bool
	errors map[string]error // topic -> why a partition was not ready
}

func (p *firstRecordProbe) OnProduceRecordBuffered(r *kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[r.Topic] {
		return
	}
	p.seen[r.Topic] = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.errors[r.Topic] = p.ready(ctx, r.Topic)
}

func (p *firstRecordProbe) ready(ctx context.Context, topic string) error {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, p.cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(mresp.Topics) != 1 {
		return fmt.Errorf("metadata: %d topics in the answer", len(mresp.Topics))
	}
	mtr := mresp.Topics[0]
	if err := kerr.ErrorForCode(mtr.ErrorCode); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(mtr.Partitions) == 0 {
		return fmt.Errorf("metadata: no partitions")
	}
	byLeader := map[int32][]int32{}
	for _, mp := range mtr.Partitions {
		if err := kerr.ErrorForCode(mp.ErrorCode); err != nil {
			return fmt.Errorf("metadata: partition %d: %w", mp.Partition, err)
		}
		byLeader[mp.Leader] = append(byLeader[mp.Leader], mp.Partition)
	}
	for leader, parts := range byLeader {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, part := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		kresp, err := p.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("list offsets on broker %d: %w", leader, err)
		}
		for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
			for _, lp := range t.Partitions {
				if err := kerr.ErrorForCode(lp.ErrorCode); err != nil {
					return fmt.Errorf("list offsets on leader %d: partition %d: %w", leader, lp.Partition, err)
				}
			}
		}
	}
	return nil
}

// TestCreatedTopicIsReadyBeforeItsFirstRecord: the sink creates topics
// for events of new aggregate types; when the client receives the first
// record of each, every partition of the topic already answers on its
// leader, so no record waits for the client's metadata retry (which waits
// out MetadataMinAge, 5s). All records are read back and the watermark
// passes every transaction.
func TestCreatedTopicIsReadyBeforeItsFirstRecord(t *testing.T) {
	t.Parallel()
	bed := testbed.Get(t)
	probeCl, err := kgo.NewClient(kgo.SeedBrokers(bed.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer probeCl.Close()
	probe := &firstRecordProbe{cl: probeCl, seen: map[string]bool{}, errors: map[string]error{}}

	const start = pglogrepl.LSN(0x1000)
	tr := checkpoint.New(start)
	s, err := sink.New(sink.Config{
		Brokers:         bed.Brokers(),
		CreateTopics:    true,
		TopicPartitions: 6,
	}, sink.Deps{Tracker: tr, Opts: []kgo.Opt{kgo.WithHooks(probe)}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}

	prefix := "outbox.event.t" + harness.Uniq()
	const topics, perTopic = 5, 20
	var names []string
	end := start
	for i := range topics {
		topic := fmt.Sprintf("%s_%d", prefix, i)
		names = append(names, topic)
		for j := range perTopic {
			end += 0x100
			ev := decode.Event{Table: "public.outbox", Topic: topic, Key: fmt.Appendf(nil, "agg-%d", j),
				ID: fmt.Appendf(nil, "%d-%d", i, j), Value: fmt.Appendf(nil, `{"seq":%d}`, j)}
			tx := &decode.Tx{Xid: uint32(i*perTopic + j + 1), CommitLSN: end - 8, EndLSN: end, CommitTime: time.Now(),
				Events: []decode.Event{ev}, First: true, Last: true}
			if err := s.Produce(ctx, tx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr.Watermark(); got != end {
		t.Errorf("watermark %s after every record was acknowledged, want %s", got, end)
	}

	probe.mu.Lock()
	for _, topic := range names {
		if !probe.seen[topic] {
			t.Errorf("topic %s: no record was buffered", topic)
		}
		if err := probe.errors[topic]; err != nil {
			t.Errorf("topic %s: the client got its first record while a partition was not ready on its leader: %v", topic, err)
		}
	}
	probe.mu.Unlock()

	recs := bed.ConsumeAll(t, names, 2*time.Second)
	count := map[string]int{}
	for _, r := range recs {
		count[r.Topic]++
	}
	for _, topic := range names {
		if count[topic] != perTopic {
			t.Errorf("topic %s: %d records read back, want %d", topic, count[topic], perTopic)
		}
	}
}
