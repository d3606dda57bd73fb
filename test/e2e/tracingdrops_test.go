package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestTracingSpansDropped: with a batch span processor's queue of 8
// (OTEL_BSP_MAX_QUEUE_SIZE) a burst of 1,000 sampled events ends spans
// faster than they are exported to a real Collector, and some are
// dropped. walrelay counts every one: once all are relayed and the slot
// confirmed past them, walrelay_trace_spans_total{outcome="dropped"} is the
// events less the spans the Collector wrote to its file, exported is
// those, the gate counted a flush with spans lost, and the log names
// OTEL_BSP_MAX_QUEUE_SIZE.
func TestTracingSpansDropped(t *testing.T) {
	t.Parallel()
	col := testbed.StartCollector(t)
	e := newEnv(t)
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN tracingspancontext text`)
	service := "walrelay-drops-" + e.Prefix
	c := e.Collect(t)
	relay := e.StartEnv(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.HTTP,
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_BSP_MAX_QUEUE_SIZE=8",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4",
	})
	relay.WaitStreaming()

	const n = 1000
	// One transaction, every writer sampled, a trace each.
	e.Bed.Exec(t, e.DSN, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
		SELECT gen_random_uuid(), $1, 'k-' || (g % 50), 'OrderCreated', '{}'::jsonb,
			format('traceparent=00-%s-%s-01', md5(g::text), substr(md5('s' || g), 1, 16))
		FROM generate_series(1, $2::int) g`, e.AggType(0), n)
	var end string
	if err := e.Bed.QueryRow(t, e.DSN, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(n, 2*time.Minute)
	if got := len(c.ToEnd()); got != n {
		t.Fatalf("Kafka holds %d records, want %d", got, n)
	}
	harness.WaitFor(t, time.Minute, "the slot confirmed past the events ("+end+")", func() bool {
		var past bool
		if err := e.Bed.QueryRow(t, e.DSN, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.Slot, end).Scan(&past); err != nil {
			t.Fatal(err)
		}
		return past
	})
	// N.B. the gate exported every span below the confirmed position:
	// each one is counted by now.
	exported := relay.Metric(`walrelay_trace_spans_total{outcome="exported"}`)
	dropped := relay.Metric(`walrelay_trace_spans_total{outcome="dropped"}`)
	failed := relay.Metric(`walrelay_trace_spans_total{outcome="failed"}`)
	lossy := relay.Metric(`walrelay_trace_flushes_total{outcome="spans_lost"}`)
	if code := relay.Stop(30 * time.Second); code != 0 {
		t.Fatalf("walrelay exit %d", code)
	}
	mine := func(spans []testbed.Span) map[string]bool {
		ids := map[string]bool{}
		for _, s := range spans {
			if s.Service == service {
				ids[s.SpanID] = true
			}
		}
		return ids
	}
	// N.B. the file exporter writes what it received after it answered.
	got := len(mine(col.WaitSpans(t, time.Minute, func(s []testbed.Span) bool { return float64(len(mine(s))) >= exported })))
	t.Logf("%d events: the Collector received %d spans; walrelay counted %v exported, %v dropped, %v failed, %v flushes with spans lost",
		n, got, exported, dropped, failed, lossy)
	if dropped == 0 {
		t.Fatalf("no span dropped with a queue of 8 (the Collector received %d of %d): the test did not force drops", got, n)
	}
	if dropped != float64(n-got) || exported != float64(got) || failed != 0 {
		t.Errorf("walrelay counted %v dropped, %v exported, %v failed; the Collector received %d of %d spans: want %d dropped, %d exported, 0 failed",
			dropped, exported, failed, got, n, n-got, got)
	}
	if lossy == 0 {
		t.Errorf(`walrelay_trace_flushes_total{outcome="spans_lost"} is 0 after %v spans were dropped`, dropped)
	}
	if !strings.Contains(relay.Log(), "raise OTEL_BSP_MAX_QUEUE_SIZE") {
		t.Errorf("no warning naming OTEL_BSP_MAX_QUEUE_SIZE in the log")
	}
}
