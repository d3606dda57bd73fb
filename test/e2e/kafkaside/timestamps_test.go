package kafkaside

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestBacklogOlderThanTheTopicsTimestampBound: a topic with
// message.timestamp.before.max.ms = 1000 and a backlog committed while
// walrelay was stopped, older than that bound by the broker's own clock
// when walrelay starts (a probe record stamped with the last commit's
// time is rejected with INVALID_TIMESTAMP first). Every event reaches its
// topic, the backlog's records with the commit time in
// walrelay.commit.time; nothing is dead-lettered, and the slot is
// confirmed past the backlog and the events committed after it. In both
// delivery modes.
func TestBacklogOlderThanTheTopicsTimestampBound(t *testing.T) {
	for _, eos := range []bool{false, true} {
		name := "at-least-once"
		if eos {
			name = "exactly-once"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			backlogOlderThanTheBound(t, eos)
		})
	}
}

func backlogOlderThanTheBound(t *testing.T, eos bool) {
	e := newEnv(t)
	const bound = "1000" // ms
	topic := "outbox.event." + e.AggType(0)
	probe := "walrelay.probe." + e.Prefix
	for _, tp := range []string{topic, probe} {
		e.Bed.CreateTopicWith(t, tp, 3, map[string]string{"message.timestamp.before.max.ms": bound})
	}
	dlq := e.Prefix + ".dlq"
	args := []string{"--dlq-topic", dlq}
	if eos {
		args = append(args, "--exactly-once", "--checkpoint-topic", e.CheckpointTopic())
	}
	relay := e.Start(t, args...)
	relay.WaitStreaming()
	if code := relay.Stop(time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// The backlog: five transactions of 40 events while walrelay is stopped.
	var from time.Time
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp()`).Scan(&from); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 7), 'T', jsonb_build_object('tx', $2::int, 'seq', i) FROM generate_series(0, 39) i`, e.AggType(0), i)
	}
	var last time.Time // not before the last commit
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp()`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	backlog := e.CommittedRows(t)

	// N.B. the broker's clock decides: wait until it rejects a record
	// stamped with the last commit's time on a topic with the same bound.
	cl := e2etest.MustClient(t, e)
	harness.WaitFor(t, time.Minute, "the broker to reject a record stamped with the backlog's last commit time", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: probe, Value: []byte("probe"), Timestamp: last}).FirstErr()
		return errors.Is(err, kerr.InvalidTimestamp)
	})

	relay = e.Start(t, args...)
	relay.WaitStreaming()
	// Events committed while walrelay runs, stamped as the bounds allow.
	for i := range 3 {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES (gen_random_uuid(), $1, 'agg-live', 'T', jsonb_build_object('live', $2::int))`, e.AggType(0), i)
	}
	rows := e.CommittedRows(t)
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, 2*time.Minute, "the slot to be confirmed past every event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	restamped := relay.Metric("walrelay_records_restamped_total")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, e.Bed.Brokers(), []string{topic}, testbed.ReadOptions{Committed: eos})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		got[id]++
		if _, ok := backlog[id]; !ok {
			continue
		}
		v, ok := harness.Header(r, "walrelay.commit.time")
		ms, perr := strconv.ParseInt(v, 10, 64)
		if !ok || perr != nil || ms < from.UnixMilli() || ms > last.UnixMilli() {
			t.Errorf("backlog record %s: walrelay.commit.time %q (present %v), want the commit time, between %d and %d", id, v, ok, from.UnixMilli(), last.UnixMilli())
		}
		if !r.Timestamp.After(last) {
			t.Errorf("backlog record %s: timestamp %s, want the time it was relayed, after %s", id, r.Timestamp, last)
		}
	}
	for id := range rows {
		if got[id] == 0 {
			t.Errorf("event %s not in %s", id, topic)
		}
	}
	if eos {
		for id, n := range got {
			if n > 1 {
				t.Errorf("event %s read %d times by a read_committed consumer", id, n)
			}
		}
	}
	dead, _, err := testbed.ReadToEnd(ctx, e.Bed.Brokers(), []string{dlq}, testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) > 0 {
		cls, _ := harness.Header(dead[0], "walrelay.error.class")
		msg, _ := harness.Header(dead[0], "walrelay.error.message")
		t.Errorf("%d records dead-lettered, want none (the first: %s: %s)", len(dead), cls, msg)
	}
	if restamped < float64(len(backlog)) {
		t.Errorf("walrelay_records_restamped_total %v, want at least the %d backlog events", restamped, len(backlog))
	}
	t.Logf("%d events, %d records read, %v restamped", len(rows), len(recs), restamped)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
