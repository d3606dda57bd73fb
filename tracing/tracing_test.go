package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/decode"
)

const (
	traceID = "0af7651916cd43dd8448eb211c80319c"
	spanID  = "b7ad6b7169203331"
	tp      = "00-" + traceID + "-" + spanID + "-01"
)

// TestParse: the values a writer puts in the column, as the Quarkus
// extension's Properties.store writes them and as a bare traceparent.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		ok         bool
		state      string
		sampled    bool
		wantSpanID string
	}{
		{"properties as stored", "#Sat Dec 06 05:00:00 UTC 2026\ntraceparent=" + tp + "\n", true, "", true, spanID},
		{"properties with tracestate", "traceparent=" + tp + "\r\ntracestate=congo=t61rcWkgMzE\n", true, "congo=t61rcWkgMzE", true, spanID},
		{"colon separator, blanks, comment", "! comment\n  traceparent : " + tp, true, "", true, spanID},
		{"continued line", "traceparent=00-" + traceID + "-\\\n    " + spanID + "-01", true, "", true, spanID},
		{"upper-case key", "Traceparent=" + tp, true, "", true, spanID},
		{"bare traceparent", tp, true, "", true, spanID},
		{"bare, unsampled", "00-" + traceID + "-" + spanID + "-00", true, "", false, spanID},
		{"bare with blanks", "  " + tp + "\n", true, "", true, spanID},
		{"empty", "", false, "", false, ""},
		{"garbage", "not a context", false, "", false, ""},
		{"zero trace id", "00-00000000000000000000000000000000-" + spanID + "-01", false, "", false, ""},
		{"short span id", "traceparent=00-" + traceID + "-b7ad6b71-01", false, "", false, ""},
		{"properties without traceparent", "uber-trace-id=abc:def:0:1", false, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, ok := Parse([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v (%v)", ok, tc.ok, sc)
			}
			if !ok {
				return
			}
			if sc.TraceID().String() != traceID || sc.SpanID().String() != tc.wantSpanID || sc.IsSampled() != tc.sampled || sc.TraceState().String() != tc.state {
				t.Errorf("got %s %s sampled=%v state=%q", sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.TraceState())
			}
		})
	}
}

func counters() (valid, malformed prometheus.Counter) {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "v"}), prometheus.NewCounter(prometheus.CounterOpts{Name: "m"})
}

func testTx() *decode.Tx {
	return &decode.Tx{Xid: 770, CommitLSN: 0x16B374D848, CommitTime: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)}
}

func header(hs []kgo.RecordHeader, k string) (string, bool) {
	for _, h := range hs {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestRelayNotExporting: without a provider the writer's context goes
// into the headers unchanged, after the record's own; a malformed one
// adds nothing and is counted.
func TestRelayNotExporting(t *testing.T) {
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Valid: valid, Malformed: malformed})
	base := []kgo.RecordHeader{{Key: "id", Value: []byte("e-1")}}
	r := &kgo.Record{Topic: "t", Context: context.Background()}
	ev := &decode.Event{ID: []byte("e-1"), TraceContext: []byte("traceparent=" + tp + "\ntracestate=k=v\n")}
	hs := rl.Record(testTx(), ev, r, append([]kgo.RecordHeader(nil), base...))
	if len(hs) != 3 || hs[0].Key != "id" || hs[1].Key != "traceparent" || hs[2].Key != "tracestate" {
		t.Fatalf("headers %v", hs)
	}
	if string(hs[1].Value) != tp || string(hs[2].Value) != "k=v" {
		t.Errorf("traceparent %q tracestate %q, want the writer's", hs[1].Value, hs[2].Value)
	}
	ev.TraceContext = []byte("traceparent=junk")
	if hs := rl.Record(testTx(), ev, r, append([]kgo.RecordHeader(nil), base...)); len(hs) != 1 {
		t.Errorf("malformed context: headers %v", hs)
	}
	if v, m := testutil.ToFloat64(valid), testutil.ToFloat64(malformed); v != 1 || m != 1 {
		t.Errorf("valid %v malformed %v, want 1 1", v, m)
	}
	rl.Acked(r, nil) // no span: nothing to end
}

// TestRelayExporting: the span is the writer's span's child, starts at the
// commit time, ends at Acked with the partition and offset, and the header
// names it; the writer's unsampled decision is honoured (parent-based).
func TestRelayExporting(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp0 := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Provider: tp0, Valid: valid, Malformed: malformed, Database: "shop"})
	r := &kgo.Record{Topic: "outbox.event.order", Context: context.Background()}
	ev := &decode.Event{ID: []byte("e-1"), Key: []byte("o-1"), Table: "public.outbox", TraceContext: []byte(tp)}
	tx := testTx()
	hs := rl.Record(tx, ev, r, nil)
	if len(exp.GetSpans()) != 0 {
		t.Fatal("span ended before the acknowledgement")
	}
	r.Partition, r.Offset = 2, 41
	rl.Acked(r, nil)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name != "db-log-write" || s.SpanKind != trace.SpanKindProducer || s.Parent.SpanID().String() != spanID || s.SpanContext.TraceID().String() != traceID {
		t.Errorf("span %s kind %s parent %s trace %s", s.Name, s.SpanKind, s.Parent.SpanID(), s.SpanContext.TraceID())
	}
	if !s.StartTime.Equal(tx.CommitTime) {
		t.Errorf("start %s, want the commit time %s", s.StartTime, tx.CommitTime)
	}
	got := map[string]string{}
	for _, a := range s.Attributes {
		got[string(a.Key)] = a.Value.Emit()
	}
	for k, v := range map[string]string{"messaging.system": "kafka", "messaging.destination.name": "outbox.event.order",
		"messaging.destination.partition.id": "2", "messaging.kafka.offset": "41", "messaging.message.id": "e-1",
		"db.system.name": "postgresql", "db.namespace": "shop", "db.collection.name": "public.outbox", "db.lsn": "16/B374D848", "db.txId": "770"} {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
	if h, _ := header(hs, "traceparent"); h != "00-"+traceID+"-"+s.SpanContext.SpanID().String()+"-01" {
		t.Errorf("traceparent %q does not name walrelay's span %s", h, s.SpanContext.SpanID())
	}

	// Unsampled by the writer: no span exported, the header keeps the
	// flag.
	exp.Reset()
	r2 := &kgo.Record{Topic: "t", Context: context.Background()}
	ev.TraceContext = []byte("00-" + traceID + "-" + spanID + "-00")
	hs = rl.Record(tx, ev, r2, nil)
	rl.Acked(r2, nil)
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported for an unsampled writer", n)
	}
	if h, _ := header(hs, "traceparent"); !strings.HasPrefix(h, "00-"+traceID+"-") || !strings.HasSuffix(h, "-00") {
		t.Errorf("traceparent %q", h)
	}

	// With a parent-based sampler an unsampled writer's event gets no span
	// at all: the writer's context goes out unchanged; a sampled one
	// (flags 0b: bit 0 set) still gets walrelay's span.
	pb := NewRelay(RelayConfig{Provider: tp0, Valid: valid, Malformed: malformed, ParentBased: true})
	for _, flags := range []string{"00", "02", "0a"} {
		w := "00-" + traceID + "-" + spanID + "-" + flags
		ev.TraceContext = []byte(w)
		r3 := &kgo.Record{Topic: "t", Context: context.Background()}
		if h, _ := header(pb.Record(tx, ev, r3, nil), "traceparent"); h != w {
			t.Errorf("parent-based, flags %s: traceparent %q, want the writer's %q", flags, h, w)
		}
	}
	ev.TraceContext = []byte("00-" + traceID + "-" + spanID + "-0b")
	r4 := &kgo.Record{Topic: "t", Context: context.Background()}
	if h, _ := header(pb.Record(tx, ev, r4, nil), "traceparent"); strings.Contains(h, spanID) || !strings.HasSuffix(h, "-01") {
		t.Errorf("parent-based, sampled: traceparent %q, want walrelay's span", h)
	}
	pb.Acked(r4, nil)
}

// TestRelayEndsOnce: the first of DeadLettered and Acked ends the span;
// a later call (the sink's safety net for an attempt that ended) changes
// nothing.
func TestRelayEndsOnce(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Valid: valid, Malformed: malformed})
	r := &kgo.Record{Topic: "t", Context: context.Background()}
	rl.Record(testTx(), &decode.Event{ID: []byte("e-1"), TraceContext: []byte(tp)}, r, nil)
	rl.DeadLettered(r, errors.New("parked behind event e-0"))
	rl.Acked(r, errors.New("produce: sink done"))
	rl.Acked(r, nil)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	for _, a := range spans[0].Attributes {
		if a.Key == "walrelay.resent" || a.Key == "messaging.kafka.offset" {
			t.Errorf("attribute %s set after the span ended", a.Key)
		}
	}
	if spans[0].Status.Description != "parked behind event e-0" {
		t.Errorf("status %q, want the dead letter's", spans[0].Status.Description)
	}
}

// TestLSNString: db.lsn as pglogrepl (and PostgreSQL) writes it.
func TestLSNString(t *testing.T) {
	for _, l := range []pglogrepl.LSN{0, 0x16B374D848, 0xFFFFFFFFFFFFFFFF, 0xA0000000B, 0x2642DD8} {
		if got, want := lsnString(l), l.String(); got != want {
			t.Errorf("lsnString(%d) = %q, want %q", uint64(l), got, want)
		}
	}
}

// TestRelayReplayed: an event committed before the Relay was made (the
// process started) may have been sent by an earlier process: its span is
// marked walrelay.replayed; one committed since is not.
func TestRelayReplayed(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Valid: valid, Malformed: malformed})
	for _, at := range []time.Time{rl.started.Add(-time.Second), rl.started.Add(time.Second)} {
		tx := testTx()
		tx.CommitTime = at
		r := &kgo.Record{Topic: "t", Context: context.Background()}
		rl.Record(tx, &decode.Event{ID: []byte("e-1"), TraceContext: []byte(tp)}, r, nil)
		rl.Acked(r, nil)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []bool{true, false} {
		got := false
		for _, a := range spans[i].Attributes {
			if a.Key == "walrelay.replayed" {
				got = a.Value.AsBool()
			}
		}
		if got != want {
			t.Errorf("span %d: walrelay.replayed %v, want %v", i, got, want)
		}
	}
}
