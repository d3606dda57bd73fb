package kafkaside

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
)

// TestRowDataCannotCreateTopicsAtWill: with --topic '${aggregatetype}' the
// row names the topic outright. --topic-allow and --max-created-topics
// decide before a topic is created: an event routed outside the pattern,
// to walrelay's own dead-letter topic (which the pattern matches), or to a
// new topic past the cap is dead-lettered with its reason and the record
// it would have been, never published and never lost; a topic that exists
// beforehand is not counted; the slot passes them all. Read back with a
// real consumer; the topics that would have been created are not in Kafka.
func TestRowDataCannotCreateTopicsAtWill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.Prefix
	dlq := p + ".dlq"
	pre := p + ".pre"
	e.Bed.CreateTopic(t, pre, 1)
	c := e.CollectRE(t, `^`+regexp.QuoteMeta(p)+`\.(a|b|pre)$`)
	dc := e.DLQCollector(t, dlq)
	relay := e.Start(t, "--topic", "${aggregatetype}", "--dlq-topic", dlq,
		"--topic-allow", regexp.QuoteMeta(p)+`\..+`, "--max-created-topics", "2")
	relay.WaitStreaming()

	type row struct {
		topic string
		class string // "" when it is published
	}
	rows := []row{
		{p + ".a", ""},                        // created: 1 of 2
		{"x" + p + ".a", "topic_not_allowed"}, // outside the pattern
		{p + ".b", ""},                        // created: 2 of 2
		{p + ".c", "topic_limit"},             // a third: past the cap
		{pre, ""},                             // exists: not counted
		{dlq, "topic_not_allowed"},            // walrelay's own topic, though the pattern matches it
		{p + ".a", ""},                        // exists now
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = harness.NewUUID()
		e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'OrderCreated', jsonb_build_object('seq', $3::int))`, ids[i], r.topic, i)
	}
	after := e.Bed.CurrentWALLSN(t, e.DSN)
	published, dead := 0, 0
	for _, r := range rows {
		if r.class == "" {
			published++
		} else {
			dead++
		}
	}
	c.WaitFor(published, time.Minute)
	dc.WaitFor(dead, time.Minute)
	harness.WaitFor(t, time.Minute, "the slot to pass every event", func() bool {
		return e.Bed.Slot(t, e.DSN, e.Slot).ConfirmedFlushLSN >= after
	})
	recs, dls := c.ToEnd(), dc.ToEnd()

	got := map[string]string{} // event id → topic it was published to
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		got[id] = r.Topic
	}
	if len(recs) != published {
		t.Errorf("%d records published, want %d", len(recs), published)
	}
	deadByID := map[string]map[string]string{}
	for _, d := range dls {
		h := map[string]string{}
		for _, k := range []string{"walrelay.error.class", "walrelay.error.message", "walrelay.original.topic", "walrelay.event.id", "walrelay.commit.lsn"} {
			h[k], _ = harness.Header(d, k)
		}
		h["value"] = string(d.Value)
		deadByID[h["walrelay.event.id"]] = h
	}
	if len(dls) != dead {
		t.Errorf("%d dead-letter records, want %d (nothing else may reach the dead-letter topic)", len(dls), dead)
	}
	for i, r := range rows {
		if r.class == "" {
			if got[ids[i]] != r.topic {
				t.Errorf("event %d: published to %q, want %q", i, got[ids[i]], r.topic)
			}
			continue
		}
		if topic, ok := got[ids[i]]; ok {
			t.Errorf("event %d (%s): published to %s", i, r.class, topic)
		}
		d := deadByID[ids[i]]
		if d == nil {
			t.Errorf("event %d (%s, topic %s): no dead-letter record", i, r.class, r.topic)
			continue
		}
		if d["walrelay.error.class"] != r.class {
			t.Errorf("event %d: dead-letter class %q, want %q (message %q)", i, d["walrelay.error.class"], r.class, d["walrelay.error.message"])
		}
		if d["walrelay.original.topic"] != r.topic {
			t.Errorf("event %d: original topic header %q, want %q", i, d["walrelay.original.topic"], r.topic)
		}
		// N.B. not lost: the record it would have been, as it was
		// (walrelay dlq redrive --offset re-publishes it).
		if want := fmt.Sprintf(`{"seq": %d}`, i); !strings.Contains(d["value"], want) {
			t.Errorf("event %d: dead-letter value %s does not hold the payload %s", i, d["value"], want)
		}
		if d["walrelay.error.message"] == "" || d["walrelay.commit.lsn"] == "" {
			t.Errorf("event %d: dead-letter headers incomplete: %v", i, d)
		}
	}
	if m := deadByID[ids[3]]["walrelay.error.message"]; !strings.Contains(m, "--max-created-topics") {
		t.Errorf("the cap's dead-letter message %q does not name --max-created-topics", m)
	}
	adm := kadm.NewClient(e2etest.MustClient(t, e))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{"x" + p + ".a", p + ".c"} {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		if d, ok := td[topic]; ok && (d.Err == nil || !kerrUnknown(d.Err)) {
			t.Errorf("topic %s exists (err %v): walrelay created a topic it should have refused", topic, d.Err)
		}
	}
	for reason, want := range map[string]float64{"topic_not_allowed": 2, "topic_limit": 1} {
		if got := relay.Metric(fmt.Sprintf(`walrelay_events_dead_lettered_total{reason=%q}`, reason)); got != want {
			t.Errorf("walrelay_events_dead_lettered_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}

func kerrUnknown(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }

// TestRefusedTopicHalts: with --on-poison=halt an event routed outside
// --topic-allow stops walrelay (exit 1) before anything is produced to
// that topic, and the slot does not pass it: the next run, dead-lettering,
// receives it again.
func TestRefusedTopicHalts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wit := e.Witness(t)
	c := e.Collect(t)
	allow := regexp.QuoteMeta("outbox.event." + e.AggType(0))
	relay := e.Start(t, "--on-poison", "halt", "--topic-allow", allow)
	relay.WaitStreaming()
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 1}')`, harness.NewUUID(), e.AggType(0))
	c.WaitFor(1, time.Minute)
	refusedID := harness.NewUUID()
	refused := e.ExecXid(t, `INSERT INTO outbox VALUES ($1, $2, 'agg-1', 'T', '{"seq": 2}')`, refusedID, e.AggType(1))
	if code := relay.Wait(time.Minute); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if log := relay.Log(); !strings.Contains(log, "--topic-allow") || !strings.Contains(log, "outbox.event."+e.AggType(1)) {
		t.Errorf("the log does not name the refused topic and --topic-allow")
	}
	e.CheckPending(t, wit, refused, "the event routed outside --topic-allow")
	if n := len(c.ToEnd()); n != 1 {
		t.Errorf("%d records in Kafka, want only the one before the refused event", n)
	}

	dlq := e.Prefix + ".dlq"
	dc := e.DLQCollector(t, dlq)
	relay = e.Start(t, "--dlq-topic", dlq, "--topic-allow", allow)
	dead := dc.WaitFor(1, time.Minute)
	if id, _ := harness.Header(dead[0], "walrelay.event.id"); id != refusedID {
		t.Errorf("dead-letter record for event %q, want the refused event %s", id, refusedID)
	}
	if code := relay.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d, want 0", code)
	}
}
