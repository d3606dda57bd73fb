package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// promiseGate holds up the client's promises, which it calls one at a
// time in order, at the first record of topic until release is closed;
// it counts the records of watch whose promise was called.
type promiseGate struct {
	topic, watch string
	entered      chan struct{}
	release      chan struct{}
	once         sync.Once
	mu           sync.Mutex
	done         int
}

func (g *promiseGate) OnProduceRecordUnbuffered(r *kgo.Record, _ error) {
	switch r.Topic {
	case g.topic:
		g.once.Do(func() {
			close(g.entered)
			<-g.release
		})
	case g.watch:
		g.mu.Lock()
		g.done++
		g.mu.Unlock()
	}
}

func (g *promiseGate) finished() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// TestNothingWrittenAheadOfARejectedBatch drives the sink against the real
// broker: Kafka rejects a batch (its topic's max.message.bytes lowered to
// 6000 after the sink read it, the records 8 KB), and the sink hands the partition a later
// transaction's record before it hears of the rejection, its promises held
// up. franz-go has failed the batch and goes on; the later record must not
// be written ahead of the rejected ones.
//
// N.B. a CI run of TestTopicLimitLoweredWhileRunning saw this window open
// by chance (a later transaction's record at offset 1, ahead of the 40 the
// broker rejected); this test holds it open. Before sink.Sink held records
// back it failed: "the record of a later transaction was written".
func TestNothingWrittenAheadOfARejectedBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	topic := "outbox.event." + e.AggType(0)
	other := e.Prefix + ".other"
	e2etest.CreateTopicWithLimit(t, e, topic, 1048588)
	e2etest.CreateTopicWithLimit(t, e, other, 1048588)
	c := e.CollectRE(t, "^"+regexp.QuoteMeta(topic)+"$")

	gate := &promiseGate{topic: other, watch: topic, entered: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()
	core, logs := observer.New(zapcore.DebugLevel)
	const start = pglogrepl.LSN(0x1000)
	tr := checkpoint.New(start)
	s, err := sink.New(sink.Config{
		Brokers:         e.Bed.Brokers(),
		CreateTopics:    true,
		DeadLetterTopic: e.Prefix + ".dlq",
		Compression:     "none",
		DeliveryTimeout: time.Minute,
		MaxMessageBytes: 1 << 20,
	}, sink.Deps{Tracker: tr, Opts: []kgo.Opt{kgo.WithHooks(gate)}}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lsn := start
	txOf := func(events ...decode.Event) *decode.Tx {
		lsn += 0x100
		return &decode.Tx{Xid: uint32(lsn), CommitLSN: lsn - 8, EndLSN: lsn, CommitTime: time.Now(), Events: events, First: true, Last: true}
	}
	ev := func(topic, id string, pad int) decode.Event {
		return decode.Event{Table: "public.outbox", Topic: topic, Key: []byte("agg-1"), ID: []byte(id), Value: fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("p", pad))}
	}

	// The sink reads both topics' limits with their first records.
	if err := s.Produce(ctx, txOf(ev(other, "first", 10))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.entered:
	case <-time.After(time.Minute):
		t.Fatal("the first record was not acknowledged")
	}
	if err := s.Produce(ctx, txOf(ev(topic, "warm", 10))); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(1, time.Minute)

	// Lower the limit; the broker is shown to enforce it on a probe.
	probe := e.Prefix + ".probe"
	e2etest.CreateTopicWithLimit(t, e, probe, 1048588)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr("6000")}}, topic, probe); err != nil {
		t.Fatalf("alter topic config: %v", err)
	}
	harness.WaitFor(t, 30*time.Second, "the broker to refuse an 8 KB record on the probe topic", func() bool {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: probe, Value: make([]byte, 8000)}).FirstErr()
		return errors.Is(err, kerr.MessageTooLarge)
	})

	// N.B. records of 8 KB, within the limit the sink read but not the
	// broker's: rejected in whatever batches the client gathers.
	var big []decode.Event
	for i := range 3 {
		big = append(big, ev(topic, fmt.Sprint("rejected-", i), 8000))
	}
	if err := s.Produce(ctx, txOf(big...)); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "franz-go to fail the rejected batch", func() bool {
		return logs.FilterMessage("batch in a produce request failed").Len() > 0
	})
	if err := s.Err(); err != nil {
		t.Fatalf("the sink heard of the rejection while its promises were held up: %v", err)
	}
	// The sink may refuse the transaction at once or fail its record.
	handed := 1 + len(big)
	if err := s.Produce(ctx, txOf(ev(topic, "later", 10))); err == nil {
		handed++
	}

	close(gate.release)
	released = true
	select {
	case <-s.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the sink did not fail")
	}
	if err := s.Err(); !errors.Is(err, sink.ErrBatchRejected) {
		t.Errorf("sink failed with %v, want ErrBatchRejected", err)
	}
	harness.WaitFor(t, time.Minute, "every record handed to the client to be finished", func() bool {
		return gate.finished() == handed
	})
	for _, r := range c.ToEnd() {
		if id, _ := harness.Header(r, "id"); id == "later" {
			t.Errorf("the record of a later transaction was written (offset %d) while the batch before it was rejected", r.Offset)
		}
	}
	if got := tr.Watermark(); got >= start+0x300 {
		t.Errorf("watermark %s passed the rejected transaction", got)
	}
}
