package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// TestPlacementPoisonEvents: with --partition-column and
// --timestamp-column each good event is read back from its own partition
// with its own timestamp; an event whose partition the topic lacks or is
// negative, whose timestamp is before 1970, or whose timestamp the broker
// refuses (a day ahead, beyond message.timestamp.after.max.ms) — each of
// which fails Debezium's task — is dead-lettered with its class, and the
// slot moves past them all.
func TestPlacementPoisonEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN part integer, ADD COLUMN occurred timestamp`)
	agg := e.AggType(0)
	// N.B. the good events carry timestamps years old (2001, 2020,
	// 2025): under the broker's default retention (7 days) its next check
	// (every 5 minutes) may delete them before the consumer reads them,
	// as a CI simulation saw ("[0] at 0 of 2" for 2 minutes).
	e.Bed.CreateTopicWith(t, "outbox.event."+agg, 3, map[string]string{"retention.ms": "-1"})
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
	relay := e.Start(t, "--dlq-topic", dlq, "--partition-column", "part", "--timestamp-column", "occurred")
	relay.WaitStreaming()

	type row struct {
		part, occurred string // SQL
		class          string // "" for a good event
		wantPart       int32
		wantMs         int64
	}
	rows := []row{
		{part: "2", occurred: "'2025-06-01 10:00:00.123456'", wantPart: 2, wantMs: 1748772000123},
		{part: "7", occurred: "NULL", class: "bad_value"},
		{part: "0", occurred: "'2001-02-03 04:05:06'", wantPart: 0, wantMs: 981173106000},
		{part: "-1", occurred: "NULL", class: "bad_value"},
		{part: "1", occurred: "'1960-01-01 00:00:00'", class: "bad_value"},
		{part: "1", occurred: "now()::timestamp + interval '1 day'", class: "rejected_by_broker"},
		{part: "1", occurred: "'2020-02-29 23:59:59.9995'", wantPart: 1, wantMs: 1583020799999},
	}
	ctx := context.Background()
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	ids := map[string]row{}
	good, poison := 0, 0
	for i, r := range rows {
		id := harness.NewUUID()
		ids[id] = r
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, part, occurred) VALUES ($1, $2, 'same-key', 'T', '{}', `+r.part+`, `+r.occurred+`)`, id, agg); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if r.class == "" {
			good++
		} else {
			poison++
		}
	}
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	c.WaitFor(good, time.Minute)
	dc.WaitFor(poison, time.Minute)
	harness.WaitFor(t, time.Minute, "the slot to move past the poison events", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	seen := map[string]bool{}
	for _, r := range c.ToEnd() {
		id, _ := harness.Header(r, "id")
		w, ok := ids[id]
		if !ok || w.class != "" {
			t.Errorf("record %s in %s[%d]: not a good event", id, r.Topic, r.Partition)
			continue
		}
		seen[id] = true
		if r.Partition != w.wantPart || r.Timestamp.UnixMilli() != w.wantMs {
			t.Errorf("record %s: partition %d, timestamp %d ms; want %d, %d", id, r.Partition, r.Timestamp.UnixMilli(), w.wantPart, w.wantMs)
		}
	}
	classes := map[string]string{}
	for _, r := range dc.ToEnd() {
		id, _ := harness.Header(r, "walrelay.event.id")
		cls, _ := harness.Header(r, "walrelay.error.class")
		classes[id] = cls
	}
	for id, w := range ids {
		switch {
		case w.class == "" && !seen[id]:
			t.Errorf("good event %s (partition %s) not relayed", id, w.part)
		case w.class != "" && classes[id] != w.class:
			t.Errorf("event (part %s, occurred %s): dead-letter class %q, want %q", w.part, w.occurred, classes[id], w.class)
		}
	}
}

// TestServerOutputStylesDoNotChangeRecords: a database whose sessions print
// dates in another DateStyle and bytea in escape format (ALTER DATABASE ...
// SET, as legacy applications do) still gets each event's timestamp and a
// bytea header's bytes as written: walrelay's replication connection asks
// for the ISO and hex output it decodes.
func TestServerOutputStylesDoNotChangeRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var db string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	e.Bed.Exec(t, e.DSN, `ALTER DATABASE "`+db+`" SET DateStyle = 'SQL, DMY'`)
	e.Bed.Exec(t, e.DSN, `ALTER DATABASE "`+db+`" SET bytea_output = 'escape'`)
	e.Bed.Exec(t, e.DSN, `ALTER DATABASE "`+db+`" SET IntervalStyle = 'sql_standard'`)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN occurred timestamp, ADD COLUMN raw bytea, ADD COLUMN took interval`)
	var style string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT current_setting('DateStyle') || ' ' || current_setting('bytea_output')`).Scan(&style); err != nil {
		t.Fatal(err)
	}
	if style != "SQL, DMY escape" {
		t.Fatalf("a new session of the database prints %q, want the settings made for it", style)
	}
	dlq := e.Prefix + ".dlq"
	c := e.Collect(t)
	dc := e.CollectRE(t, "^"+regexp.QuoteMeta(dlq)+"$")
	relay := e.Start(t, "--dlq-topic", dlq, "--timestamp-column", "occurred", "--header-columns", "raw:raw,took:took")
	relay.WaitStreaming()
	id := harness.NewUUID()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, occurred, raw, took)
		VALUES ($1, $2, 'k', 'T', '{}', '2025-06-01 10:00:00.123456', '\x00ff41'::bytea, interval '1 day 02:03:04')`, id, e.AggType(0))
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	harness.WaitFor(t, time.Minute, "the slot to move past the event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	if dead := dc.ToEnd(); len(dead) != 0 {
		msg, _ := harness.Header(dead[0], "walrelay.error.message")
		t.Fatalf("the event was dead-lettered: %s", msg)
	}
	recs := c.ToEnd()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if got, want := r.Timestamp.UnixMilli(), int64(1748772000123); got != want {
		t.Errorf("record timestamp %d ms, want %d (2025-06-01 10:00:00.123 UTC)", got, want)
	}
	if got, _ := harness.Header(r, "raw"); got != "\x00\xffA" {
		t.Errorf("header raw %q, want the bytes 00 ff 41", got)
	}
	if got, _ := harness.Header(r, "took"); got != "1 day 02:03:04" {
		t.Errorf("header took %q, want PostgreSQL's own interval style %q", got, "1 day 02:03:04")
	}
}
