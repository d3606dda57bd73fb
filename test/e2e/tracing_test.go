package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/test/e2e/e2etest"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// tracedEvent is one outbox row the test wrote in a transaction of its
// own, and what it expects of its trace.
type tracedEvent struct {
	id, key, column string // the row; column: its tracingspancontext value ("" NULL)
	writer          trace.SpanContext
	xid             uint32
	traced          bool // a valid, sampled context: one unbroken trace expected
}

// TestTracingThroughOutbox: a writer span's context, written to the
// outbox's tracingspancontext column (java.util.Properties as the Quarkus
// extension writes it, or a bare traceparent), continues through walrelay
// and the inbox consumer into one trace per event, all received over the
// network (OTLP: walrelay over HTTP, the test's writer and consumer over
// gRPC) by a real OpenTelemetry Collector and read back from its file:
// writer span -> walrelay's db-log-write span (start = the commit time as a
// test_decoding slot reports it, ended after Kafka's acknowledgement: it
// carries the record's offset) -> the consumer's "process" span, whose
// parent is the record's traceparent, which carries the writer's trace id
// and names walrelay's span. A duplicate delivery's consumer span is
// marked. A malformed context is relayed without a parent and counted; an
// unsampled writer's decision is kept (no span exported, flag 00 in the
// header); a row without a context gets no header.
func TestTracingThroughOutbox(t *testing.T) {
	t.Parallel()
	col := testbed.StartCollector(t)
	e := newEnv(t)
	ctx := context.Background()
	e.Bed.Exec(t, e.DSN, `ALTER TABLE outbox ADD COLUMN tracingspancontext text`)
	// The truth about commit times: a test_decoding slot of the test's own.
	witness := "wt_" + harness.Uniq()
	e.Bed.Exec(t, e.DSN, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, witness)

	// The writer's and the consumer's tracer provider: the OpenTelemetry
	// Go SDK exporting over gRPC to the Collector, parent-based sampling.
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(col.GRPC), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "e2e-app"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp) // the inbox's spans go to the global provider
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	writerTracer := tp.Tracer("e2e-writer")

	c := e.Collect(t)
	// A topic too small for one event: its record is dead-lettered.
	small := "outbox.event." + e.AggType(1)
	e2etest.CreateTopicWithLimit(t, e, small, 1024)
	dlq := e.Prefix + ".dlq"
	dc := e.DLQCollector(t, dlq)
	relay := e.StartEnv(t, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.HTTP, // http/protobuf, the default protocol
		"OTEL_SERVICE_NAME=walrelay-e2e",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}, "--dlq-topic", dlq)
	relay.WaitStreaming()

	agg := e.AggType(0)
	topic := "outbox.event." + agg
	var events []*tracedEvent
	write := func(ev *tracedEvent) {
		ev.id = harness.NewUUID()
		ev.xid = e.TxXid(t, func(tx pgx.Tx) {
			var v any
			if ev.column != "" {
				v = ev.column
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
				VALUES ($1, $2, $3, 'OrderCreated', '{}'::jsonb, $4)`, ev.id, agg, ev.key, v); err != nil {
				t.Fatal(err)
			}
		})
		events = append(events, ev)
	}
	// Traced events: a writer span around each transaction, its context
	// in the column as the Quarkus extension (Properties.store) writes
	// it, or as a bare traceparent.
	for i := range 4 {
		_, span := writerTracer.Start(ctx, "create-order", trace.WithSpanKind(trace.SpanKindServer))
		sc := span.SpanContext()
		ev := &tracedEvent{key: fmt.Sprintf("o-%d", i), writer: sc, traced: true}
		tp := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
		if i%2 == 0 {
			ev.column = "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=" + tp + "\n"
		} else {
			ev.column = tp
		}
		write(ev)
		span.End()
	}
	unsampledTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	unsampled := &tracedEvent{key: "o-unsampled", column: "traceparent=00-" + unsampledTrace + "-00f067aa0ba902b7-00"}
	write(unsampled)
	malformed := &tracedEvent{key: "o-malformed", column: "traceparent=00-not-a-context-01"}
	write(malformed)
	plain := &tracedEvent{key: "o-plain"}
	write(plain)
	// The dead-lettered event: a payload its topic refuses.
	_, dspan := writerTracer.Start(ctx, "create-big-order", trace.WithSpanKind(trace.SpanKindServer))
	big := &tracedEvent{key: "c-big", writer: dspan.SpanContext()}
	big.column = fmt.Sprintf("traceparent=00-%s-%s-01", big.writer.TraceID(), big.writer.SpanID())
	big.id = harness.NewUUID()
	big.xid = e.TxXid(t, func(tx pgx.Tx) {
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
			VALUES ($1, $2, $3, 'CustomerCreated', jsonb_build_object('pad', repeat('x', 4000)), $4)`, big.id, e.AggType(1), big.key, big.column); err != nil {
			t.Fatal(err)
		}
	})
	dspan.End()

	// The records, read back to the end offsets.
	recs := c.WaitFor(len(events), time.Minute)
	byID := map[string]*kgo.Record{}
	for _, r := range recs {
		id, _ := harness.Header(r, "id")
		byID[id] = r
	}
	for _, ev := range events {
		if byID[ev.id] == nil {
			t.Fatalf("event %s (%s) not relayed", ev.id, ev.key)
		}
	}
	if v := relay.Metric(`walrelay_trace_contexts_total{outcome="malformed"}`); v != 1 {
		t.Errorf("walrelay_trace_contexts_total{outcome=\"malformed\"} = %v, want 1", v)
	}
	// The dead letter keeps the context: the writer's trace, under
	// walrelay's span, which ends marked.
	dls := dc.WaitFor(1, time.Minute)
	// N.B. counted once the dead letter is there: the dead-lettered event
	// (a valid context) is the last one written.
	if v := relay.Metric(`walrelay_trace_contexts_total{outcome="valid"}`); v != 6 {
		t.Errorf("walrelay_trace_contexts_total{outcome=\"valid\"} = %v, want 6", v)
	}
	dlTP, _ := harness.Header(dls[0], "traceparent")
	if !strings.HasPrefix(dlTP, "00-"+big.writer.TraceID().String()+"-") {
		t.Errorf("dead letter traceparent %q, want the writer's trace %s", dlTP, big.writer.TraceID())
	}

	// The consumer: the inbox over walrelay's topic; the handler sees the
	// span in its ctx.
	pool, err := pgxpool.New(ctx, e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := inbox.CreateTable(ctx, pool, ""); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	handled := map[string]trace.SpanContext{} // id -> the handler's span context
	consumer, err := inbox.New(inbox.Config{
		Brokers: e.KafkaBrokers(), Group: "g-" + harness.Uniq(), Topics: []string{topic}, Pool: pool,
		InstanceID: inbox.DynamicMembership,
		Handler: func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error {
			id, _ := harness.Header(r, "id")
			mu.Lock()
			handled[id] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			return nil
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consumer.Run(cctx) }()
	defer func() { stop(); <-done }()
	harness.WaitFor(t, time.Minute, "the inbox to apply every record", func() bool { return consumer.Stats().Applied >= int64(len(events)) })
	// A duplicate delivery of the first traced record: its span is marked.
	first := byID[events[0].id]
	dupRec := &kgo.Record{Topic: topic, Key: first.Key, Value: first.Value, Headers: first.Headers}
	cl := e2etest.MustClient(t, e)
	if err := cl.ProduceSync(ctx, dupRec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the inbox to skip the duplicate", func() bool { return consumer.Stats().Duplicates >= 1 })

	// Commit times from the witness slot: "COMMIT xid (at TIMESTAMP)".
	commitAt := map[uint32]time.Time{}
	conn := harness.Connect(t, e.DSN)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL, 'include-timestamp', '1', 'skip-empty-xacts', '1') WHERE data LIKE 'COMMIT%'`, witness)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		var xid uint32
		var at string
		if _, err := fmt.Sscanf(data, "COMMIT %d (at ", &xid); err != nil {
			t.Fatalf("witness line %q: %v", data, err)
		}
		at = strings.TrimSuffix(data[strings.Index(data, "(at ")+4:], ")")
		ts, err := time.Parse("2006-01-02 15:04:05.999999-07", at)
		if err != nil {
			t.Fatalf("witness time %q: %v", at, err)
		}
		commitAt[xid] = ts
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, witness); err != nil {
		t.Fatal(err)
	}

	// The spans, from the Collector's file: per traced event a writer, a
	// walrelay and two consumer spans (the delivery and, for the first,
	// its duplicate).
	want := 4*3 + 1 + 2 + 2 // and the consumer spans of the malformed and plain rows, roots; the dead letter's writer and walrelay spans
	spans := col.WaitSpans(t, time.Minute, func(s []testbed.Span) bool { return len(s) >= want })
	byTrace := map[string][]testbed.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	for i, ev := range events[:4] {
		trID := ev.writer.TraceID().String()
		var writer, relayed *testbed.Span
		var consumed []testbed.Span
		for _, s := range byTrace[trID] {
			switch {
			case s.Service == "e2e-app" && s.Name == "create-order":
				writer = &s
			case s.Service == "walrelay-e2e":
				relayed = &s
			case s.Service == "e2e-app" && s.Kind == 5:
				consumed = append(consumed, s)
			default:
				t.Errorf("event %d: unexpected span %+v", i, s)
			}
		}
		if writer == nil || relayed == nil || len(consumed) == 0 {
			t.Fatalf("event %d (trace %s): writer %v, walrelay %v, consumer %v: not one unbroken trace\nall spans: %+v", i, trID, writer, relayed, consumed, spans)
		}
		r := byID[ev.id]
		// writer -> walrelay
		if relayed.Parent != writer.SpanID || relayed.Name != "db-log-write" || relayed.Kind != 4 {
			t.Errorf("event %d: walrelay span %q kind %d parent %s, want db-log-write (producer) under the writer's %s", i, relayed.Name, relayed.Kind, relayed.Parent, writer.SpanID)
		}
		if at, ok := commitAt[ev.xid]; !ok || !relayed.Start.Equal(at) {
			t.Errorf("event %d: walrelay span starts %s, the transaction committed at %s (xid %d)", i, relayed.Start, at, ev.xid)
		}
		if got := relayed.Attributes["messaging.kafka.offset"]; got != fmt.Sprint(r.Offset) {
			t.Errorf("event %d: walrelay span offset %q, the record is at %d: not ended after the acknowledgement", i, got, r.Offset)
		}
		if !relayed.End.After(relayed.Start) {
			t.Errorf("event %d: walrelay span %s to %s", i, relayed.Start, relayed.End)
		}
		for k, v := range map[string]string{"messaging.system": "kafka", "messaging.destination.name": topic,
			"messaging.destination.partition.id": fmt.Sprint(r.Partition), "messaging.message.id": ev.id,
			"db.system.name": "postgresql", "db.collection.name": "public.outbox", "db.txId": fmt.Sprint(ev.xid)} {
			if relayed.Attributes[k] != v {
				t.Errorf("event %d: walrelay span %s = %q, want %q", i, k, relayed.Attributes[k], v)
			}
		}
		// the record's header: the same trace, walrelay's span its parent
		if h, _ := harness.Header(r, "traceparent"); h != "00-"+trID+"-"+relayed.SpanID+"-01" {
			t.Errorf("event %d: traceparent %q, want the trace %s under walrelay's span %s", i, h, trID, relayed.SpanID)
		}
		// in Debezium's place: before id and the additional headers
		if len(r.Headers) < 2 || r.Headers[0].Key != "traceparent" || r.Headers[1].Key != "id" {
			var names []string
			for _, h := range r.Headers {
				names = append(names, h.Key)
			}
			t.Errorf("event %d: headers %v, want traceparent first, then id (Debezium's order)", i, names)
		}
		// walrelay -> consumer, the handler inside it
		dups := 0
		for _, s := range consumed {
			if s.Parent != relayed.SpanID || s.Name != "process "+topic || s.Attributes["messaging.message.id"] != ev.id {
				t.Errorf("event %d: consumer span %q parent %s id %q, want process %s under walrelay's %s", i, s.Name, s.Parent, s.Attributes["messaging.message.id"], topic, relayed.SpanID)
			}
			if s.Attributes["messaging.inbox.duplicate"] == "true" {
				dups++
			} else if hs := handled[ev.id]; hs.SpanID().String() != s.SpanID {
				t.Errorf("event %d: the handler ran in span %s, the consumer span is %s", i, hs.SpanID(), s.SpanID)
			}
		}
		if wantDups := map[bool]int{true: 1, false: 0}[i == 0]; dups != wantDups || len(consumed) != 1+wantDups {
			t.Errorf("event %d: %d consumer spans, %d marked duplicate; want %d and %d", i, len(consumed), dups, 1+wantDups, wantDups)
		}
		t.Logf("event %d: trace %s: writer %s -> db-log-write %s (%s to %s) -> process %s", i, trID, writer.SpanID, relayed.SpanID,
			relayed.Start.Format(time.RFC3339Nano), relayed.End.Format(time.RFC3339Nano), consumed[0].SpanID)
		if i == 0 { // the trace docs/tracing.md shows
			var b strings.Builder
			for _, h := range r.Headers {
				fmt.Fprintf(&b, "record header %s: %q\n", h.Key, h.Value)
			}
			for _, s := range append([]testbed.Span{*writer, *relayed}, consumed...) {
				fmt.Fprintf(&b, "span %q service=%s kind=%d trace=%s span=%s parent=%s\n  start=%s end=%s\n", s.Name, s.Service, s.Kind,
					s.TraceID, s.SpanID, s.Parent, s.Start.Format(time.RFC3339Nano), s.End.Format(time.RFC3339Nano))
				for _, k := range slices.Sorted(maps.Keys(s.Attributes)) {
					fmt.Fprintf(&b, "  %s=%s\n", k, s.Attributes[k])
				}
			}
			t.Logf("the trace of event 0 (column %q):\n%s", ev.column, b.String())
		}
	}
	// The dead-lettered event's walrelay span: the writer's child, marked,
	// and named by the dead letter's traceparent.
	var dlSpan *testbed.Span
	for _, s := range byTrace[big.writer.TraceID().String()] {
		if s.Service == "walrelay-e2e" {
			dlSpan = &s
		}
	}
	if dlSpan == nil || dlSpan.Parent != big.writer.SpanID().String() || dlSpan.Attributes["walrelay.dead_lettered"] != "true" || dlSpan.StatusCode != 2 ||
		dlTP != "00-"+dlSpan.TraceID+"-"+dlSpan.SpanID+"-01" {
		t.Errorf("dead-lettered event: walrelay span %+v, dead letter traceparent %q", dlSpan, dlTP)
	}
	// The unsampled writer: its decision kept, nothing exported.
	if h, _ := harness.Header(byID[unsampled.id], "traceparent"); !strings.HasPrefix(h, "00-"+unsampledTrace+"-") || !strings.HasSuffix(h, "-00") {
		t.Errorf("unsampled: traceparent %q, want trace %s, flags 00", h, unsampledTrace)
	}
	if n := len(byTrace[unsampledTrace]); n != 0 {
		t.Errorf("unsampled: %d spans exported", n)
	}
	// The malformed context and the row without one: relayed, no header;
	// the consumer's span of each is a root of a trace of its own.
	for name, ev := range map[string]*tracedEvent{"malformed": malformed, "no context": plain} {
		if h, ok := harness.Header(byID[ev.id], "traceparent"); ok {
			t.Errorf("%s: traceparent %q on the record", name, h)
		}
		for _, s := range spans {
			if s.Attributes["messaging.message.id"] == ev.id && (s.Service != "e2e-app" || s.Parent != "") {
				t.Errorf("%s: span %+v, want only the consumer's, without a parent", name, s)
			}
		}
	}
}
