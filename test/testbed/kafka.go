package testbed

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeTimeout bounds ConsumeAll's wait for the records present when it
// was called.
const consumeTimeout = 2 * time.Minute

func (b *Bed) client(t testing.TB) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	if err != nil {
		t.Fatalf("testbed: kafka client: %v", err)
	}
	return cl
}

func (b *Bed) admin(t testing.TB) (*kadm.Client, func()) {
	t.Helper()
	cl := b.client(t)
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
	cl := b.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = make(map[string]*string, len(configs))
		for k, v := range configs {
			cfg[k] = &v
		}
	}
	if err := CreateTopics(ctx, cl, partitions, cfg, topic); err != nil {
		t.Fatalf("testbed: %v", err)
	}
}

// ConsumeAll reads topics from the beginning, all partitions, with a real
// franz-go consumer (no group, read_uncommitted) and returns the records in
// per-partition offset order. It first lists the end offsets and reads at
// least up to them, then returns once no new record arrived for idle. Topics
// that do not exist count as empty, and the test's log says so; a
// partition whose end offset cannot be listed is never taken for empty
// (ReadToEnd). Transaction markers are passed, not returned.
func (b *Bed) ConsumeAll(t testing.TB, topics []string, idle time.Duration) []*kgo.Record {
	t.Helper()
	recs, _ := b.consumeAll(t, topics, idle, false, false)
	return recs
}

// ConsumeAllCommitted is ConsumeAll with a read_committed consumer
// (kgo.FetchIsolationLevel(kgo.ReadCommitted())) read up to each
// partition's last stable offset: records of aborted and open transactions
// are not returned. control holds the transaction markers passed.
func (b *Bed) ConsumeAllCommitted(t testing.TB, topics []string, idle time.Duration) (recs, control []*kgo.Record) {
	t.Helper()
	return b.consumeAll(t, topics, idle, true, false)
}

// ConsumeAllSettled is ConsumeAllCommitted once every transaction with
// records in topics when it is called is decided (ReadOptions.Settled):
// the read back after a relay confirmed its Kafka transactions, whose
// commit markers the broker writes after the commit returned.
func (b *Bed) ConsumeAllSettled(t testing.TB, topics []string, idle time.Duration) (recs, control []*kgo.Record) {
	t.Helper()
	return b.consumeAll(t, topics, idle, true, true)
}

func (b *Bed) consumeAll(t testing.TB, topics []string, idle time.Duration, committed, settled bool) (recs, control []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	recs, control, err := ReadToEnd(ctx, b.brokers, topics, ReadOptions{Committed: committed, Settled: settled, Idle: idle,
		Absent: func(topic string) { t.Logf("testbed: ConsumeAll: topic %s does not exist: counted empty", topic) }})
	if err != nil {
		t.Fatalf("testbed: ConsumeAll(%v) within %s: %v", topics, consumeTimeout, err)
	}
	return recs, control
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
