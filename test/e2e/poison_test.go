package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestPoisonEventsAreDeadLettered: each kind of row that cannot become a
// record goes to the dead-letter topic with its headers; the good events
// around it arrive in order; the slot moves past all of them.
func TestPoisonEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.LooseOutbox)
	dlq := e.Prefix + ".dlq"
	good := e.AggType(0)
	strict := e.Prefix + "_strict"
	// A topic whose broker rejects every record's timestamp as too old.
	e.Bed.CreateTopic(t, "outbox.event."+strict, 1)
	adm := kadm.NewClient(e2etest.MustClient(t, e))
	if _, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "message.timestamp.before.max.ms", Value: e2etest.Ptr("0")}}, "outbox.event."+strict); err != nil {
		t.Fatalf("alter topic config: %v", err)
	}
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay := e.Start(t, "--dlq-topic", dlq, "--kafka-max-message-bytes", "200000")
	relay.WaitStreaming()

	type row struct {
		id, aggType, key, payload *string
		class                     string // "" for a good event
	}
	s := func(v string) *string { return &v }
	seq := 0
	goodRow := func() row {
		seq++
		return row{id: s(harness.NewUUID()), aggType: s(good), key: s("agg-1"), payload: s(fmt.Sprintf(`{"seq": %d}`, seq))}
	}
	rows := []row{
		goodRow(),
		{id: s(harness.NewUUID()), aggType: s(good), key: nil, payload: s(`{"case": "null key"}`), class: "null_key"},
		goodRow(),
		{id: s(harness.NewUUID()), aggType: s(good), key: s(""), payload: s(`{"case": "empty key"}`), class: "empty_key"},
		goodRow(),
		{id: nil, aggType: s(good), key: s("agg-1"), payload: s(`{"case": "null id"}`), class: "null_id"},
		goodRow(),
		{id: s(harness.NewUUID()), aggType: s("bad name!"), key: s("agg-1"), payload: s(`{"case": "invalid topic"}`), class: "invalid_topic"},
		goodRow(),
		{id: s(harness.NewUUID()), aggType: s(good), key: s("agg-1"), payload: s(`{"big": "` + strings.Repeat("x", 300000) + `"}`), class: "too_large"},
		goodRow(),
		{id: s(harness.NewUUID()), aggType: s(strict), key: s("agg-1"), payload: s(`{"case": "rejected"}`), class: "rejected_by_broker"},
		goodRow(),
	}
	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	for i, r := range rows {
		// Every other row shares a transaction with the next one.
		if _, err := conn.Exec(ctx, `INSERT INTO outbox VALUES ($1, $2, $3, 'OrderCreated', $4::jsonb)`, r.id, r.aggType, r.key, r.payload); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	poison := 0
	for _, r := range rows {
		if r.class != "" {
			poison++
		}
	}
	recs := c.WaitFor(seq, time.Minute)
	dead := dc.WaitFor(poison, time.Minute)
	harness.WaitFor(t, 30*time.Second, "the slot to move past the poison events", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	recs, dead = c.ToEnd(), dc.ToEnd()

	// The good events, in order, none missing. N.B. the batch the broker
	// rejects restarts the pipeline from the confirmed position (to find
	// the record at fault), so an event after it may arrive twice: the
	// first occurrences count.
	var got []string
	seen := map[string]bool{}
	for _, r := range recs {
		if v := string(r.Value); r.Topic == "outbox.event."+good && !seen[v] {
			seen[v] = true
			got = append(got, v)
		}
	}
	if len(got) != seq {
		t.Errorf("%d good records, want %d: %q", len(got), seq, got)
	}
	for i, v := range got {
		if want := fmt.Sprintf(`{"seq": %d}`, i+1); v != want {
			t.Errorf("good record %d: %s, want %s", i, v, want)
		}
	}
	// Each poison event in the dead-letter topic (again after a restart,
	// at most), with its headers.
	byClass := map[string]*kgo.Record{}
	for _, r := range dead {
		cls, _ := harness.Header(r, "walrelay.error.class")
		id, _ := harness.Header(r, "walrelay.event.id")
		if prev := byClass[cls]; prev != nil {
			if pid, _ := harness.Header(prev, "walrelay.event.id"); pid != id {
				t.Errorf("two dead-letter records of class %s, for events %q and %q", cls, pid, id)
			}
			continue
		}
		byClass[cls] = r
	}
	for _, r := range rows {
		if r.class == "" {
			continue
		}
		d := byClass[r.class]
		if d == nil {
			t.Errorf("no dead-letter record of class %s (have %v)", r.class, e2etest.Keys(byClass))
			continue
		}
		for _, h := range []string{"walrelay.error.message", "walrelay.source.table", "walrelay.commit.lsn", "walrelay.xid"} {
			if v, ok := harness.Header(d, h); !ok || v == "" {
				t.Errorf("class %s: header %s missing", r.class, h)
			}
		}
		if tbl, _ := harness.Header(d, "walrelay.source.table"); tbl != "public.outbox" {
			t.Errorf("class %s: source table %q", r.class, tbl)
		}
		if r.id != nil {
			if id, _ := harness.Header(d, "walrelay.event.id"); id != *r.id {
				t.Errorf("class %s: event id header %q, want %q", r.class, id, *r.id)
			}
		}
		switch r.class {
		case "too_large":
			if col, _ := harness.Header(d, "walrelay.dropped.column"); col != "payload" {
				t.Errorf("too_large: dropped column %q, want payload", col)
			}
			if n, _ := harness.Header(d, "walrelay.dropped.bytes"); n == "" || n == "0" {
				t.Errorf("too_large: dropped bytes %q", n)
			}
			if len(d.Value) > 10000 || !strings.Contains(string(d.Value), `"aggregateid":"agg-1"`) {
				t.Errorf("too_large: value should be the row without its payload, got %d bytes", len(d.Value))
			}
		case "rejected_by_broker":
			if ot, _ := harness.Header(d, "walrelay.original.topic"); ot != "outbox.event."+strict {
				t.Errorf("rejected: original topic %q", ot)
			}
		default:
			if !strings.Contains(string(d.Value), `"case":`) {
				t.Errorf("class %s: value %s is not the row as JSON", r.class, d.Value)
			}
		}
	}
	// N.B. an event dead-lettered again after the restart counts again:
	// at least one each, and as many as the dead-letter topic holds.
	held := map[string]float64{}
	for _, r := range dead {
		cls, _ := harness.Header(r, "walrelay.error.class")
		held[cls]++
	}
	for _, class := range []string{"null_key", "empty_key", "null_id", "invalid_topic", "too_large", "rejected_by_broker"} {
		if got := relay.Metric(fmt.Sprintf(`walrelay_events_dead_lettered_total{reason=%q}`, class)); got < 1 || got > held[class] {
			t.Errorf("walrelay_events_dead_lettered_total{reason=%q} = %v, want 1 to %v (the dead-letter records of that class)", class, got, held[class])
		}
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestHaltOnPoison: with --on-poison=halt walrelay stops with a clear error
// and does not confirm the poison event: restarted with dead-lettering, it
// receives the poison event and the one after it again.
func TestHaltOnPoison(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, e2etest.LooseOutbox)
	wit := e.Witness(t)
	c := e.Collect(t)
	relay := e.Start(t, "--on-poison", "halt")
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	poisonID := harness.NewUUID()
	poison := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, NULL, 'T', '{"poison": true}')`, poisonID, e.AggType(0))
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 2}')`, harness.NewUUID(), e.AggType(0))
	code := relay.Wait(time.Minute)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if log := relay.Log(); !strings.Contains(log, "poison event") || !strings.Contains(log, "null key") || !strings.Contains(log, poisonID) {
		t.Errorf("the log does not say which poison event stopped walrelay")
	}
	e.CheckPending(t, wit, poison, "the poison event")
	time.Sleep(time.Second)
	if n := c.Len(); n != 1 {
		t.Errorf("%d records in Kafka, want only the one before the poison event", n)
	}

	// Nothing was lost: the next run gets the poison event and the event
	// after it from the slot.
	dlq := e.Prefix + ".dlq"
	dc := e.CollectRE(t, "^"+strings.ReplaceAll(dlq, ".", `\.`)+"$")
	relay = e.Start(t, "--on-poison", "dead-letter", "--dlq-topic", dlq)
	dead := dc.WaitFor(1, time.Minute)
	if id, _ := harness.Header(dead[0], "walrelay.event.id"); id != poisonID {
		t.Errorf("dead-letter record for event %q, want the poison event %s", id, poisonID)
	}
	harness.WaitFor(t, time.Minute, "the event after the poison event", func() bool {
		for _, r := range c.Records() {
			if string(r.Value) == `{"seq": 2}` {
				return true
			}
		}
		return false
	})
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

// TestNonInsertChangesAreIgnored: updates, deletes and truncates of the
// outbox are never published, and are counted.
func TestNonInsertChangesAreIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox WITH (publish = 'insert, update, delete, truncate')`, e.Pub))
	c := e.Collect(t)
	relay := e.Start(t)
	relay.WaitStreaming()
	id1, id2 := harness.NewUUID(), harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $3, 'agg-1', 'T', '{"n": 1}'), ($2, $3, 'agg-1', 'T', '{"n": 2}')`, id1, id2, e.AggType(0))
	e.Bed.Exec(t, e.DSN, `UPDATE outbox SET payload = '{"n": 3}' WHERE id = $1`, id1)
	e.Bed.Exec(t, e.DSN, `DELETE FROM outbox WHERE id = $1`, id2)
	e.Bed.Exec(t, e.DSN, `TRUNCATE outbox`)
	last := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"n": 4}')`, last, e.AggType(0))
	recs := c.WaitFor(3, time.Minute)
	time.Sleep(time.Second)
	recs = c.Records()
	var ids []string
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		ids = append(ids, id)
	}
	if want := []string{id1, id2, last}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("records %v, want the three inserts %v", ids, want)
	}
	if got := relay.Metric("walrelay_changes_ignored_total"); got != 3 {
		t.Errorf("walrelay_changes_ignored_total = %v, want 3 (update, delete, truncate)", got)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestSchemaChangesWhileStreaming: the relation cache follows ALTER TABLE;
// rows that can still be mapped flow (a mapped column renamed or dropped
// stops walrelay instead: schemachange_test.go).
func TestSchemaChangesWhileStreaming(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	relay := e.Start(t, "--dlq-topic", dlq)
	relay.WaitStreaming()
	ins := func(n int) {
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'agg-1', 'T', jsonb_build_object('n', $3::int))`, harness.NewUUID(), e.AggType(0), n)
	}
	ins(1)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN extra text DEFAULT 'x'`)
	ins(2)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox DROP COLUMN extra`)
	ins(3)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ALTER COLUMN type TYPE varchar(100)`)
	ins(4)
	recs := c.WaitFor(4, time.Minute)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if want := []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`, `{"n": 4}`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q", got, want)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
