package testbed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeTimeout bounds ConsumeAll's wait for the records present when it
// was called.
const consumeTimeout = 2 * time.Minute

func (b *Bed) admin(t testing.TB) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	if err != nil {
		t.Fatalf("testbed: kafka client: %v", err)
	}
	return kadm.NewClient(cl), cl.Close
}

// CreateTopic creates topic (replication factor 1) and waits until every
// partition has a leader.
func (b *Bed) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	b.CreateTopicWith(t, topic, partitions, nil)
}

// CreateTopicWith is CreateTopic with topic configs (e.g. max.message.bytes,
// cleanup.policy).
func (b *Bed) CreateTopicWith(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	adm, closeAdm := b.admin(t)
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = make(map[string]*string, len(configs))
		for k, v := range configs {
			cfg[k] = &v
		}
	}
	if _, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic); err != nil {
		t.Fatalf("testbed: create topic %s: %v", topic, err)
	}
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			td := tds[topic]
			ready := td.Err == nil && len(td.Partitions) == int(partitions)
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testbed: topic %s has no leader for every partition after %s (last error: %v)", topic, queryTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ConsumeAll reads topics from the beginning, all partitions, with a real
// franz-go consumer (no group, read_uncommitted) and returns the records in
// per-partition offset order. It first lists the end offsets and reads at
// least up to them, then returns once no new record arrived for idle. Topics
// that do not exist count as empty. Transaction markers are passed, not
// returned.
func (b *Bed) ConsumeAll(t testing.TB, topics []string, idle time.Duration) []*kgo.Record {
	t.Helper()
	recs, _ := b.consumeAll(t, topics, idle, false)
	return recs
}

// ConsumeAllCommitted is ConsumeAll with a read_committed consumer
// (kgo.FetchIsolationLevel(kgo.ReadCommitted())) read up to each
// partition's last stable offset: records of aborted and open transactions
// are not returned. control holds the transaction markers passed.
func (b *Bed) ConsumeAllCommitted(t testing.TB, topics []string, idle time.Duration) (recs, control []*kgo.Record) {
	t.Helper()
	return b.consumeAll(t, topics, idle, true)
}

func (b *Bed) consumeAll(t testing.TB, topics []string, idle time.Duration, committed bool) (recs, control []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()

	type tp struct {
		topic     string
		partition int32
	}
	want := map[tp]int64{} // end offsets when called
	adm, closeAdm := b.admin(t)
	list := adm.ListEndOffsets
	if committed {
		// N.B. the last stable offsets: a read_committed consumer stops
		// below an open transaction.
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topics...)
	closeAdm()
	var shardErrs *kadm.ShardErrors
	if err != nil && !errors.As(err, &shardErrs) {
		t.Fatalf("testbed: list end offsets of %v: %v", topics, err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		case o.Err != nil:
			t.Fatalf("testbed: end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		case o.Offset > 0:
			want[tp{o.Topic, o.Partition}] = o.Offset
		}
	})

	// N.B. the transaction markers are kept so that the position passes
	// them: a partition may end with one (a producer's commit or abort),
	// and a consumer that skips it never reaches the end offset.
	opts := []kgo.Opt{kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.SeedBrokers(b.brokers...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(min(max(idle/2, 10*time.Millisecond), 500*time.Millisecond)),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		// Notice topics created while consuming soon.
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)...)
	if err != nil {
		t.Fatalf("testbed: kafka consumer: %v", err)
	}
	defer cl.Close()

	next := map[tp]int64{}
	last := time.Now()
	for {
		caughtUp := true
		for p, end := range want {
			caughtUp = caughtUp && next[p] >= end
		}
		deadline, _ := ctx.Deadline()
		if caughtUp {
			if time.Since(last) >= idle {
				return recs, control
			}
			deadline = last.Add(idle)
		}
		pctx, pcancel := context.WithDeadline(ctx, deadline)
		fetches := cl.PollFetches(pctx)
		pcancel()
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
				errors.Is(err, kerr.UnknownTopicOrPartition) {
				return
			}
			t.Fatalf("testbed: consume %s/%d: %v", topic, partition, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				control = append(control, r)
			} else {
				recs = append(recs, r)
			}
			next[tp{r.Topic, r.Partition}] = r.Offset + 1
			last = time.Now()
		})
		if ctx.Err() != nil {
			var behind []string
			for p, end := range want {
				if next[p] < end {
					behind = append(behind, fmt.Sprintf("%s/%d at %d of %d", p.topic, p.partition, next[p], end))
				}
			}
			t.Fatalf("testbed: ConsumeAll(%v): not caught up after %s: %s", topics, consumeTimeout, strings.Join(behind, ", "))
		}
	}
}

// StopKafka stops the broker (SIGTERM, SIGKILL after 20 s) and waits for it to
// exit; on a cluster, every node. The test must have called Disrupt; against
// an external broker the test fails (it cannot inject the fault), saying how
// to run it on a managed bed. Disrupt restarts a broker the test leaves
// stopped.
func (b *Bed) StopKafka(t testing.TB) {
	t.Helper()
	if b.cluster != nil {
		b.requireNodeFault(t, "StopKafka")
		begin := time.Now()
		if err := b.cluster.stop(); err != nil {
			t.Fatalf("testbed: stop Kafka cluster: %v", err)
		}
		t.Logf("testbed: stopped the Kafka cluster in %.1fs", time.Since(begin).Seconds())
		return
	}
	if b.kafka == nil {
		t.Fatalf("testbed: StopKafka needs a Kafka the test bed manages, and %s names an external broker; %s", EnvKafkaBrokers, runManaged)
	}
	b.requireDisrupt(t, "StopKafka")
	begin := time.Now()
	if err := b.kafka.stop(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	b.kafkaDown.Store(true)
	t.Logf("testbed: stopped Kafka in %.1fs", time.Since(begin).Seconds())
}

// StartKafka starts the broker again with the same command line (its storage
// is kept) and waits until it answers metadata requests; on a cluster, every
// node that is not running. The test must have
// called Disrupt; against an external broker the test fails, as StopKafka.
func (b *Bed) StartKafka(t testing.TB) {
	t.Helper()
	if b.cluster != nil {
		b.requireNodeFault(t, "StartKafka")
		begin := time.Now()
		if err := b.cluster.start(context.Background(), b.detached()); err != nil {
			t.Fatalf("testbed: start Kafka cluster: %v", err)
		}
		t.Logf("testbed: started the Kafka cluster in %.1fs", time.Since(begin).Seconds())
		return
	}
	if b.kafka == nil {
		t.Fatalf("testbed: StartKafka needs a Kafka the test bed manages, and %s names an external broker; %s", EnvKafkaBrokers, runManaged)
	}
	b.requireDisrupt(t, "StartKafka")
	begin := time.Now()
	if err := b.startKafka(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Logf("testbed: started Kafka in %.1fs", time.Since(begin).Seconds())
}

func (b *Bed) startKafka() error {
	if b.kafka.running() {
		return errors.New("start Kafka: it is running (pid file " + b.kafka.PIDFile + ")")
	}
	if err := b.kafka.launch(context.Background(), b.detached()); err != nil {
		return fmt.Errorf("start Kafka: %w", err)
	}
	b.kafkaDown.Store(false)
	return nil
}
