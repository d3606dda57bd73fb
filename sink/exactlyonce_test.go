package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/kafkastate"
)

func TestExactlyOnceConfig(t *testing.T) {
	base := Config{ExactlyOnce: true}
	cases := []struct {
		name string
		mod  func(*Config)
		want string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"timeout not above the delivery timeout", func(c *Config) { c.TransactionTimeout = time.Minute; c.DeliveryTimeout = time.Minute }, "is not above --kafka-delivery-timeout"},
		{"commit interval above a quarter of the timeout", func(c *Config) { c.CommitInterval = 2 * time.Minute }, "--transaction-commit-interval"},
		{"bad checkpoint topic", func(c *Config) { c.CheckpointTopic = "a b" }, "checkpoint topic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.mod(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate: %v, want an error with %q", err, c.want)
			}
		})
	}
	// N.B. the null sink is a collaborator's switch (Deps), refused by New.
	if _, err := New(base, Deps{Tracker: checkpoint.New(start), Null: true}, zap.NewNop()); !errors.Is(err, ErrNullExactlyOnce) || !strings.Contains(err.Error(), "null sink") {
		t.Errorf("New with the null sink and exactly-once: %v, want ErrNullExactlyOnce", err)
	}
	if got := base.WithSlot("s1").withDefaults(); got.TransactionalID != "walrelay-s1" || got.CheckpointTopic != "walrelay.checkpoints" || got.TransactionTimeout != 5*time.Minute {
		t.Errorf("defaults: transactional id %q, checkpoint topic %q, timeout %s; want walrelay-s1, walrelay.checkpoints, 5m",
			got.TransactionalID, got.CheckpointTopic, got.TransactionTimeout)
	}
}

// TestExactlyOnceWatermarkWaitsForTheCommit: the records of a transaction
// are acknowledged by Kafka, yet the watermark stays until its Kafka
// transaction committed.
func TestExactlyOnceWatermarkWaitsForTheCommit(t *testing.T) {
	c := newCluster(t)
	s, tr := newSink(t, c, OnPoisonDeadLetter, 10*time.Second, func(cfg *sinkSetup) {
		cfg.ExactlyOnce = true
		cfg.Source = kafkastate.Source{Slot: "s1", Database: "db", SystemID: "1"}
		cfg.CommitInterval = 2 * time.Minute
		cfg.TransactionTimeout = 10 * time.Minute
	})
	ctx := context.Background()
	end := start + 0x100
	if err := s.Produce(ctx, tx(1, end, event("t", "a", "1"), event("t", "b", "2"))); err != nil {
		t.Fatal(err)
	}
	if err := s.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := tr.InFlight(); recs != 1 || tr.Watermark() != start {
		t.Fatalf("records acknowledged, before the commit: %d pending (want the commit's 1), watermark %s (want %s)", recs, tr.Watermark(), start)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if tr.Watermark() != end {
		t.Fatalf("after the commit the watermark is %s, want %s", tr.Watermark(), end)
	}
	cp, _, err := kafkastate.ReadCheckpoint(ctx, s.adm, s.baseOpts(), s.cfg.CheckpointTopic, s.deps.Source, s.waitUndecided)
	if err != nil || cp != end {
		t.Fatalf("checkpoint %s, %v; want %s", cp, err, end)
	}
	// A transaction the checkpoint covers is confirmed without a record.
	s2, tr2 := newSink(t, c, OnPoisonDeadLetter, 10*time.Second, func(cfg *sinkSetup) {
		cfg.ExactlyOnce = true
		cfg.Source = s.deps.Source
	})
	if err := s2.Produce(ctx, tx(1, end, event("t", "a", "1"), event("t", "b", "2"))); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := tr2.InFlight(); recs != 0 || tr2.Watermark() != end {
		t.Fatalf("a transaction the checkpoint covers: %d records pending, watermark %s; want 0 and %s", recs, tr2.Watermark(), end)
	}
}

// TestExactlyOnceRejectedRecordHalts: in exactly-once mode a batch Kafka
// rejects is isolated as always, but the record at fault halts (dead-letter
// mode notwithstanding): its Kafka transaction already holds the earlier
// records of its PostgreSQL transaction and can only be aborted. Nothing
// is confirmed past it.
func TestExactlyOnceRejectedRecordHalts(t *testing.T) {
	c := newCluster(t)
	rejectTopic(t, c, "strict", kerr.InvalidRecord.Code)
	iso := NewIsolation()
	ctx := context.Background()
	eos := func(cfg *sinkSetup) {
		cfg.Isolation = iso
		cfg.ExactlyOnce = true
		cfg.Source = kafkastate.Source{Slot: "s1", Database: "db", SystemID: "1"}
	}
	s1, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute, eos)
	if err := s1.Produce(ctx, tx(1, start+100, event("strict", "k", "id"))); err != nil && !errors.Is(err, ErrBatchRejected) {
		t.Fatal(err)
	}
	if err := waitFailed(t, s1); !errors.Is(err, ErrBatchRejected) {
		t.Fatalf("first sink: %v, want ErrBatchRejected", err)
	}
	s1.Close()
	s2, tr2 := newSink(t, c, OnPoisonDeadLetter, time.Minute, eos)
	err := s2.Produce(ctx, tx(1, start+100, event("strict", "k", "id")))
	if !errors.Is(err, ErrPoison) || !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "--exactly-once") {
		t.Errorf("isolating sink: %v, want ErrPoison wrapping INVALID_RECORD, naming --exactly-once", err)
	}
	if tr.Watermark() != start || tr2.Watermark() != start {
		t.Errorf("watermark moved past the rejected record")
	}
}
