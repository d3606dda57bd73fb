package sink

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
)

// TestStampBounds: the bounds read from a topic's configs, and which
// commit times they put outside (within a margin of half the bound, at
// most the slack).
func TestStampBounds(t *testing.T) {
	now := time.UnixMilli(1800000000000)
	const slack = 4 * time.Minute
	kafkaDefaults := map[string]string{"message.timestamp.type": "CreateTime", "message.timestamp.before.max.ms": "9223372036854775807", "message.timestamp.after.max.ms": "3600000"}
	cases := []struct {
		name    string
		configs map[string]string
		ago     time.Duration // commit time before now (negative: ahead)
		outside bool
	}{
		{"defaults, a week old", kafkaDefaults, 7 * 24 * time.Hour, false},
		{"defaults, 10 minutes ahead", kafkaDefaults, -10 * time.Minute, false},
		{"defaults, 58 minutes ahead", kafkaDefaults, -58 * time.Minute, true},
		{"before 1s, 400ms old", map[string]string{"message.timestamp.before.max.ms": "1000"}, 400 * time.Millisecond, false},
		{"before 1s, 600ms old", map[string]string{"message.timestamp.before.max.ms": "1000"}, 600 * time.Millisecond, true},
		{"before 1h, 50 minutes old", map[string]string{"message.timestamp.before.max.ms": "3600000"}, 50 * time.Minute, false},
		{"before 1h, 57 minutes old", map[string]string{"message.timestamp.before.max.ms": "3600000"}, 57 * time.Minute, true},
		{"difference 1h (before 3.6), ahead", map[string]string{"message.timestamp.difference.max.ms": "3600000"}, -57 * time.Minute, true},
		{"before 0: nothing can meet it", map[string]string{"message.timestamp.before.max.ms": "0"}, time.Hour, false},
		{"log append time", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "1000"}, time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := noBounds
			for k, v := range c.configs {
				b.set(k, v)
			}
			if got := b.outside(now.Add(-c.ago), now, slack); got != c.outside {
				t.Errorf("outside = %v, want %v (bounds %+v)", got, c.outside, b)
			}
		})
	}
}

// rejectOlderThan makes the cluster reject, with INVALID_TIMESTAMP, every
// produce request to topic with a batch stamped before cutoff: a bound
// the sink did not read (lowered after it read the topic's configs).
func rejectOlderThan(t *testing.T, c *kfake.Cluster, topic string, cutoff time.Time) {
	t.Helper()
	rejectBatches(t, c, topic, kerr.InvalidTimestamp.Code, func(records []byte) bool {
		var b kmsg.RecordBatch
		return b.ReadFrom(records) == nil && b.FirstTimestamp < cutoff.UnixMilli()
	})
}

// TestRejectedTimestampsAreStampedAgain: Kafka rejects the commit time of
// records (a bound lowered after the sink read the topic's configs). The
// sink fails without isolating or dead-lettering them; the next one,
// given the same Isolation (as the relay restarts from the confirmed
// position), stamps them with the current time, the commit time in
// walrelay.commit.time, and they arrive; once they are confirmed, later
// records carry their commit time again.
func TestRejectedTimestampsAreStampedAgain(t *testing.T) {
	c := newCluster(t)
	rejectOlderThan(t, c, "bounded", time.Unix(1700000001, 0)) // tx's commit time is 1700000000
	iso := NewIsolation()
	opt := func(cfg *sinkSetup) { cfg.Compression = "none"; cfg.Isolation = iso; cfg.TopicPartitions = 1 }
	s1, tr1 := newSink(t, c, OnPoisonDeadLetter, time.Minute, opt)
	ctx := context.Background()
	// N.B. more records than stampRetries, all failed with the batch.
	part := func() *decode.Tx {
		var evs []decode.Event
		for i := range 6 {
			evs = append(evs, event("bounded", fmt.Sprint("k", i), fmt.Sprint("id", i)))
		}
		return tx(1, start+100, evs...)
	}
	if err := s1.Produce(ctx, part()); err != nil {
		t.Fatal(err)
	}
	err := waitFailed(t, s1)
	if !errors.Is(err, kerr.InvalidTimestamp) || errors.Is(err, ErrBatchRejected) {
		t.Fatalf("first sink: %v, want INVALID_TIMESTAMP without ErrBatchRejected", err)
	}
	if iso.Active() {
		t.Fatal("a rejected commit time started an isolation")
	}
	if through, topics := iso.stamping(); !topics["bounded"] || through < start+100-8 {
		t.Fatalf("stamping %v through %s, want topic bounded through the transaction", topics, through)
	}
	confirmed := tr1.Watermark()
	s1.Close()

	tr2 := checkpoint.New(confirmed)
	before := time.Now().Truncate(time.Millisecond)
	s2, err := New(Config{Brokers: c.ListenAddrs(), CreateTopics: true, TopicPartitions: 1, DeliveryTimeout: time.Minute, MaxMessageBytes: 10000, Compression: "none"}, Deps{Tracker: tr2, Isolation: iso}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s2.Produce(ctx, part()); err != nil {
		t.Fatal(err)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tr2.Watermark(); got != start+100 {
		t.Fatalf("watermark %s, want %s", got, start+100)
	}
	// Confirmed past them: the next transaction ends the stamping.
	late := tx(2, start+200, event("other", "k3", "id3"))
	if err := s2.Produce(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, topics := iso.stamping(); topics != nil {
		t.Errorf("stamping %v after the relay confirmed past it", topics)
	}
	for _, r := range readAll(t, c, "bounded", 6) {
		if got := header(r, HeaderCommitTime); got != "1700000000000" {
			t.Errorf("record %s: %s %q, want the commit time 1700000000000", header(r, "id"), HeaderCommitTime, got)
		}
		if r.Timestamp.Before(before) {
			t.Errorf("record %s: timestamp %s, want the time it was produced (after %s)", header(r, "id"), r.Timestamp, before)
		}
	}
	for _, r := range readAll(t, c, "other", 1) {
		if !r.Timestamp.Equal(time.Unix(1700000000, 0)) || header(r, HeaderCommitTime) != "" {
			t.Errorf("record of a topic whose timestamps were never rejected: timestamp %s, %s %q; want the commit time, no header", r.Timestamp, HeaderCommitTime, header(r, HeaderCommitTime))
		}
	}
	if dl := readAll(t, c, "walrelay.dlq", -1); len(dl) != 0 {
		t.Errorf("%d records dead-lettered, want none", len(dl))
	}
}
