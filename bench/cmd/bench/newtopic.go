package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/testbed"
)

// NewTopic is one batch of events of one aggregate type: the time from
// its commit until every record was in Kafka.
type NewTopic struct {
	Relay string `json:"relay"` // walrelay, or walrelay-before (-walrelay-before)
	// Kind: "first new topic after start", "new topic", "pre-created topic".
	Kind    string  `json:"kind"`
	Topic   string  `json:"topic"`
	Events  int     `json:"events"`
	Seconds float64 `json:"commit_to_all_in_kafka_s"`
	Load    string  `json:"loadavg_after"`
	Error   string  `json:"error,omitempty"`
}

const newTopicEvents = 100

// runNewTopic measures, for each walrelay binary (the one under test and
// -walrelay-before if given, alternately), how long 100 events of a new
// aggregate type take from their commit until all are in Kafka, for the
// first topic walrelay creates after its start, for the next ones, and for
// a topic created beforehand. "In Kafka": the topic's end offsets, asked of
// each leader directly every 2 ms, sum to 100.
func (b *bench) runNewTopic(ctx context.Context) error {
	bins := []struct{ label, bin string }{{relayWalrelay, b.bin}}
	if b.cfg.walrelayBefore != "" {
		bins = append([]struct{ label, bin string }{{relayWalrelay + "-before", b.cfg.walrelayBefore}}, bins...)
	}
	run := time.Now().Format("150405")
	var errs []error
	for round := 0; round < b.cfg.newTopicRounds; round++ {
		for _, x := range bins {
			if ctx.Err() != nil {
				break
			}
			if err := b.newTopicRelay(ctx, x.label, x.bin, fmt.Sprintf("%s_%d", run, round)); err != nil {
				errs = append(errs, fmt.Errorf("newtopic %s: %w", x.label, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (b *bench) newTopicRelay(ctx context.Context, label, bin, run string) error {
	slot := slotName("nt", label)
	if _, err := rig.CreateSlot(ctx, b.dsn, slot, slot); err != nil {
		return err
	}
	defer func() {
		if err := rig.DropSlot(context.WithoutCancel(ctx), b.dsn, slot, slot); err != nil {
			logf("%v", err)
		}
	}()
	typ := func(what string) string { return "nt_" + strings.ReplaceAll(label, "-", "_") + "_" + run + "_" + what }
	pre := typ("pre")
	if err := b.adm.CreateTopics(ctx, int32(b.cfg.partitions), nil, "wr."+pre); err != nil {
		return err
	}
	if err := b.waitRecords(ctx, "wr."+pre, 0, time.Minute); err != nil {
		return err
	}
	saved := b.bin
	b.bin = bin
	r, err := b.startRelay(ctx, relayWalrelay, slot, 0, "", "")
	b.bin = saved
	if err != nil {
		return err
	}
	defer func() {
		if err := r.stop(); err != nil {
			logf("newtopic: stop %s: %v", label, err)
		}
	}()
	// Warm: walrelay streams and its client is connected, on the
	// pre-created topic, before the first new aggregate type.
	if err := testbed.Exec(ctx, b.dsn, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, 'agg-0', 'OrderCreated', bench_payload(0))`, pre); err != nil {
		return err
	}
	if err := b.waitRecords(ctx, "wr."+pre, 1, 2*time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	one := func(kind, t string, want int64) {
		nt := NewTopic{Relay: label, Kind: kind, Topic: "wr." + t, Events: newTopicEvents}
		secs, err := b.commitToKafka(ctx, t, want)
		nt.Seconds, nt.Load = round(secs, 3), rig.LoadAvg()
		if err != nil {
			nt.Error = err.Error()
		}
		b.res.NewTopics = append(b.res.NewTopics, nt)
		logf("newtopic: %s, %s: %d events commit → all in Kafka %.3f s; load %s%s", label, kind, newTopicEvents, nt.Seconds, nt.Load, errSuffix(nt.Error))
	}
	for i := 0; i < b.cfg.newTopics; i++ {
		kind := "new topic"
		if i == 0 {
			kind = "first new topic after start"
		}
		one(kind, typ(fmt.Sprintf("new%d", i)), newTopicEvents)
	}
	one("pre-created topic", pre, 1+newTopicEvents)
	return nil
}

// commitToKafka commits newTopicEvents rows of aggregate type typ in one
// transaction and returns the seconds from the commit until topic "wr."+typ
// holds want records.
func (b *bench) commitToKafka(ctx context.Context, typ string, want int64) (float64, error) {
	if err := testbed.Exec(ctx, b.dsn, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
		SELECT gen_random_uuid(), $1, 'agg-' || i, 'OrderCreated', bench_payload(i) FROM generate_series(1, $2::int) i`, typ, newTopicEvents); err != nil {
		return 0, err
	}
	committed := time.Now()
	err := b.waitRecords(ctx, "wr."+typ, want, time.Minute)
	return time.Since(committed).Seconds(), err
}

// waitRecords polls topic until it holds at least want records.
func (b *bench) waitRecords(ctx context.Context, topic string, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last int64
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, ok, err := b.adm.TopicRecords(ctx, topic)
		if err == nil && ok && n >= want {
			return nil
		}
		last = n
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("topic %s: %d of %d records after %s", topic, last, want, timeout)
}
