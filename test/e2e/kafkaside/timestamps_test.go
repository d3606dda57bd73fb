package kafkaside

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// bound is the topics' message.timestamp.before.max.ms in these tests.
const bound = "1000"

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
	forBothModes(t, func(t *testing.T, eos bool) {
		e := newEnv(t)
		b := newBoundedTopic(t, e, eos, true)
		relay := e.Start(t, b.args...)
		relay.WaitStreaming()
		if code := relay.Stop(time.Minute); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		b.commitBacklog(t)
		relay = e.Start(t, b.args...)
		relay.WaitStreaming()
		b.check(t, relay)
	})
}

// TestTimestampBoundLoweredWhileRunning: walrelay read a topic's bounds
// (none) with its first record; then the topic gets
// message.timestamp.before.max.ms = 1000, and a backlog older than that
// by the broker's clock reaches walrelay (paused with SIGSTOP while it is
// committed). Kafka rejects the commit times with INVALID_TIMESTAMP;
// walrelay reads the bounds again and stamps the records with the current
// time instead of dead-lettering them: every event arrives, none is
// dead-lettered, the slot is confirmed past them.
func TestTimestampBoundLoweredWhileRunning(t *testing.T) {
	forBothModes(t, func(t *testing.T, eos bool) {
		e := newEnv(t)
		b := newBoundedTopic(t, e, eos, false)
		relay := e.Start(t, b.args...)
		relay.WaitStreaming()
		first := harness.NewUUID()
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-first', 'T', '{}')`, first, e.AggType(0))
		harness.WaitFor(t, time.Minute, "the first event in Kafka", func() bool {
			recs, _, err := testbed.ReadToEnd(context.Background(), e.Bed.Brokers(), []string{b.topic}, testbed.ReadOptions{Committed: eos})
			return err == nil && len(recs) > 0
		})
		adm := kadm.NewClient(e2etest.MustClient(t, e))
		if _, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "message.timestamp.before.max.ms", Value: e2etest.Ptr(bound)}}, b.topic); err != nil {
			t.Fatalf("alter topic config: %v", err)
		}
		if err := syscall.Kill(relay.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(relay.Pid(), syscall.SIGCONT) }()
		b.commitBacklog(t)
		if err := syscall.Kill(relay.Pid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		b.check(t, relay)
	})
}

func forBothModes(t *testing.T, f func(t *testing.T, eos bool)) {
	for _, eos := range []bool{false, true} {
		name := "at-least-once"
		if eos {
			name = "exactly-once"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, eos)
		})
	}
}

// boundedTopic is a test's topic, its dead-letter topic and its backlog.
type boundedTopic struct {
	e          *env
	eos        bool
	topic, dlq string
	probe      string // a topic with the bound, for the broker's clock
	args       []string
	from, last time.Time                    // the backlog was committed between them
	backlog    map[string]harness.OutboxRow // by id
}

// newBoundedTopic creates the probe topic with the bound, and the topic,
// with the bound when bounded (else the test sets it later).
func newBoundedTopic(t *testing.T, e *env, eos, bounded bool) *boundedTopic {
	b := &boundedTopic{e: e, eos: eos, topic: "outbox.event." + e.AggType(0), dlq: e.Prefix + ".dlq", probe: "walrelay.probe." + e.Prefix}
	b.args = []string{"--dlq-topic", b.dlq}
	if eos {
		b.args = append(b.args, "--exactly-once", "--checkpoint-topic", e.CheckpointTopic())
	}
	e.Bed.CreateTopicWith(t, b.probe, 1, map[string]string{"message.timestamp.before.max.ms": bound})
	var configs map[string]string
	if bounded {
		configs = map[string]string{"message.timestamp.before.max.ms": bound}
	}
	e.Bed.CreateTopicWith(t, b.topic, 3, configs)
	return b
}

// commitBacklog commits five transactions of 40 events and waits until
// the broker's clock has passed the last commit time by the bound.
func (b *boundedTopic) commitBacklog(t *testing.T) {
	e := b.e
	before := e.CommittedRows(t)
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp()`).Scan(&b.from); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox SELECT gen_random_uuid(), $1, 'agg-' || (i % 7), 'T', jsonb_build_object('tx', $2::int, 'seq', i) FROM generate_series(0, 39) i`, e.AggType(0), i)
	}
	// N.B. not before the last commit.
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT clock_timestamp()`).Scan(&b.last); err != nil {
		t.Fatal(err)
	}
	b.backlog = e.CommittedRows(t)
	for id := range before {
		delete(b.backlog, id)
	}
	// N.B. the broker's clock decides: wait until it rejects a record
	// stamped with the last commit's time on a topic with the same bound.
	cl := e2etest.MustClient(t, e)
	harness.WaitFor(t, time.Minute, "the broker to reject a record stamped with the backlog's last commit time", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: b.probe, Value: []byte("probe"), Timestamp: b.last}).FirstErr()
		return errors.Is(err, kerr.InvalidTimestamp)
	})
}

// check commits three events more, waits for the slot to be confirmed
// past them, and checks what Kafka holds.
func (b *boundedTopic) check(t *testing.T, relay *relayProc) {
	e := b.e
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
	// N.B. settled: the broker writes a Kafka transaction's markers
	// after its commit returned, and so after walrelay may confirm it.
	recs, _, err := testbed.ReadToEnd(ctx, e.Bed.Brokers(), []string{b.topic}, testbed.ReadOptions{Committed: b.eos, Settled: b.eos})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		got[id]++
		if _, ok := b.backlog[id]; !ok {
			continue
		}
		v, ok := harness.Header(r, "walrelay.commit.time")
		ms, perr := strconv.ParseInt(v, 10, 64)
		if !ok || perr != nil || ms < b.from.UnixMilli() || ms > b.last.UnixMilli() {
			t.Errorf("backlog record %s: walrelay.commit.time %q (present %v), want the commit time, between %d and %d", id, v, ok, b.from.UnixMilli(), b.last.UnixMilli())
		}
		if !r.Timestamp.After(b.last) {
			t.Errorf("backlog record %s: timestamp %s, want the time it was relayed, after %s", id, r.Timestamp, b.last)
		}
	}
	for id := range rows {
		if got[id] == 0 {
			t.Errorf("event %s not in %s", id, b.topic)
		}
	}
	if b.eos {
		for id, n := range got {
			if n > 1 {
				t.Errorf("event %s read %d times by a read_committed consumer", id, n)
			}
		}
	}
	dead, _, err := testbed.ReadToEnd(ctx, e.Bed.Brokers(), []string{b.dlq}, testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) > 0 {
		cls, _ := harness.Header(dead[0], "walrelay.error.class")
		msg, _ := harness.Header(dead[0], "walrelay.error.message")
		t.Errorf("%d records dead-lettered, want none (the first: %s: %s)", len(dead), cls, msg)
	}
	if restamped < float64(len(b.backlog)) {
		t.Errorf("walrelay_records_restamped_total %v, want at least the %d backlog events", restamped, len(b.backlog))
	}
	t.Logf("%d events, %d records read, %v restamped", len(rows), len(recs), restamped)
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
