package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTracingBatchRejected: with spans exported, Kafka rejects a batch
// (the topic's max.message.bytes lowered while walrelay runs, one record
// of a transaction over it among good ones); walrelay restarts and
// produces the topic's records one at a time (isolation), dead-lettering
// the large one. Every event's span ends and reaches a real Collector:
// each record read back has a db-log-write span ended after its
// acknowledgement (its offset), the dead-lettered event one marked
// walrelay.dead_lettered, and the spans of the rejected attempt are
// marked walrelay.resent.
//
// N.B. before the fix the records produced one at a time got their
// headers but their spans were never ended (isolation replaced the
// record's context), so never exported.
func TestTracingBatchRejected(t *testing.T) { tracingBatchRejected(t, false) }

// TestTracingBatchRejectedParked is TestTracingBatchRejected with
// --on-poison=park: the rejected record parks its aggregate and the
// aggregate's later event goes to the dead-letter topic behind it; both
// parked events' spans end marked walrelay.dead_lettered.
func TestTracingBatchRejectedParked(t *testing.T) { tracingBatchRejected(t, true) }

func tracingBatchRejected(t *testing.T, park bool) {
	t.Parallel()
	col := testbed.StartCollector(t)
	b := newParkBed(t, 3)
	e := b.e
	ctx := context.Background()
	adm := kadm.NewClient(e2etest.MustClient(t, e))
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr("1048588")}}, b.topic); err != nil {
		t.Fatal(err)
	}
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN tracingspancontext text`)
	c := e.Collect(t)
	dc := e.DLQCollector(t, b.dlq)
	args := []string{"--dlq-topic", b.dlq}
	if park {
		args = b.relayArgs()
	}
	const service = "walrelay-rejected"
	relay := e.StartEnv(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.HTTP,
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}, args...)
	relay.WaitStreaming()

	// One transaction per round: an event of K and of each other
	// aggregate, each with a sampled writer context of its own; K's is
	// over the lowered limit when big.
	written := map[string]string{} // event id -> trace id
	keys := []string{parkK, "agg-00", "agg-01", "agg-02"}
	round := func(big bool) {
		e.TxXid(t, func(tx pgx.Tx) {
			for _, k := range keys {
				pad := ""
				if big && k == parkK {
					// N.B. random: compression cannot shrink it below the limit.
					for len(pad) < 2*parkLimit {
						pad += harness.NewUUID()
					}
				}
				id := harness.NewUUID()
				trace := strings.ReplaceAll(harness.NewUUID(), "-", "")
				span := strings.ReplaceAll(harness.NewUUID(), "-", "")[:16]
				written[id] = trace
				if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
					VALUES ($1, $2, $3, 'Changed', jsonb_build_object('pad', $4::text), $5)`,
					id, e.AggType(0), k, pad, "traceparent=00-"+trace+"-"+span+"-01"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	round(false)
	b.waitConfirmed(t)

	// Lower the limit; the broker is shown to enforce it on a probe.
	probe := e.Prefix + ".probe"
	e2etest.CreateTopicWithLimit(t, e, probe, 1048588)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: e2etest.Ptr(fmt.Sprint(parkLimit))}}, b.topic, probe); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Bed.Brokers()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	harness.WaitFor(t, 30*time.Second, "the broker to refuse an 8 KB record on the probe topic", func() bool {
		return errors.Is(cl.ProduceSync(ctx, &kgo.Record{Topic: probe, Value: make([]byte, 2*parkLimit)}).FirstErr(), kerr.MessageTooLarge)
	})
	round(true)
	round(false)
	b.waitConfirmed(t)
	if log := relay.Log(); !strings.Contains(log, "kafka rejected a record batch") {
		t.Fatalf("walrelay's log does not say that Kafka rejected a batch: the test did not test isolation:\n%s", log)
	}

	// What became of each event: its record's offset, or dead-lettered.
	offset := map[string]int64{}
	for _, r := range c.ToEnd() {
		if r.Topic == b.topic {
			id, _ := harness.Header(r, "id")
			offset[id] = r.Offset
		}
	}
	deadLettered := map[string]bool{}
	for _, r := range dc.ToEnd() {
		id, _ := harness.Header(r, sink.HeaderEventID)
		deadLettered[id] = true
	}
	wantDL := 1
	if park {
		wantDL = 2 // K's later event, behind it
	}
	if len(deadLettered) != wantDL {
		t.Fatalf("%d events dead-lettered, want %d", len(deadLettered), wantDL)
	}
	for id := range written {
		if _, ok := offset[id]; !ok && !deadLettered[id] {
			t.Fatalf("event %s neither relayed nor dead-lettered", id)
		}
	}

	// Every event's span, ended: after its acknowledgement, at its offset,
	// or marked dead-lettered; other spans only of a failed attempt, marked.
	final := func(id string, s testbed.Span) bool {
		if o, ok := offset[id]; ok {
			return s.Attributes["messaging.kafka.offset"] == fmt.Sprint(o) && s.StatusCode != 2
		}
		return s.Attributes["walrelay.dead_lettered"] == "true" && s.StatusCode == 2
	}
	missing := func(spans []testbed.Span) []string {
		done := map[string]bool{}
		for _, s := range spans {
			if id := s.Attributes["messaging.message.id"]; s.Service == service && final(id, s) {
				done[id] = true
			}
		}
		var out []string
		for id := range written {
			if !done[id] {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(time.Minute)
	spans := col.Spans(t)
	for len(missing(spans)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // N.B. polling the Collector's file
		spans = col.Spans(t)
	}
	if m := missing(spans); len(m) > 0 {
		var b strings.Builder
		for _, s := range spans {
			fmt.Fprintf(&b, "  %s id=%s status=%d %v\n", s.Name, s.Attributes["messaging.message.id"], s.StatusCode, s.Attributes)
		}
		t.Fatalf("%d of %d events have no ended span in the Collector (acknowledged at their offset, or dead-lettered): %v\nwalrelay's spans:\n%s",
			len(m), len(written), m, b.String())
	}
	resent := 0
	for _, s := range spans {
		if s.Service != service {
			continue
		}
		id := s.Attributes["messaging.message.id"]
		if written[id] != s.TraceID {
			t.Errorf("span %s of event %s in trace %s, the writer's is %s", s.SpanID, id, s.TraceID, written[id])
		}
		if s.End.Before(s.Start) {
			t.Errorf("span %s of event %s ends %s before it starts %s", s.SpanID, id, s.End, s.Start)
		}
		switch {
		case final(id, s):
		case s.Attributes["walrelay.resent"] == "true" && s.StatusCode == 2:
			resent++
		default:
			t.Errorf("span %s of event %s: neither acknowledged, dead-lettered nor marked resent: status %d %v", s.SpanID, id, s.StatusCode, s.Attributes)
		}
	}
	if resent == 0 {
		t.Errorf("no span marked walrelay.resent: the rejected attempt's spans were not exported")
	}
	t.Logf("%d events, %d walrelay spans (%d of the rejected attempt, marked resent), %d dead-lettered", len(written), len(spans), resent, len(deadLettered))
}
