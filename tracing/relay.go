package tracing

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/decode"
)

// SpanName is the name of walrelay's span per event: Debezium's for the
// span it back-dates to the commit (TracingSpanUtil's db-log-write), so
// that a trace reads the same whichever relay carried the event.
const SpanName = "db-log-write"

// ScopeName is the instrumentation scope of walrelay's spans.
const ScopeName = "github.com/walrelay/walrelay/tracing"

// Relay carries trace contexts through the sink (sink.Tracer): it parses
// an event's context, starts the event's span when exporting, writes the
// record's traceparent and tracestate headers, and ends the span when
// Kafka acknowledges the record. Safe for concurrent use.
type Relay struct {
	tracer           trace.Tracer // nil: not exporting
	parentBased      bool
	drops            func(trace.TraceID) bool // RelayConfig.Drops
	valid, malformed prometheus.Counter
	fixed            []attribute.KeyValue  // every span's, first
	kind             trace.SpanStartOption // producer
	started          time.Time             // NewRelay's call: the process's start
	// bufs holds *attrBuf: the attributes of a span are built in one
	// reused slice (the SDK copies them), not a new one per span.
	bufs sync.Pool
	// lean, when set, exports the spans on the lean path (leanSpan),
	// sampled by sampler with ids from ids: those of the Provider.
	lean     *leanExporter
	sampler  sdktrace.Sampler
	ids      sdktrace.IDGenerator
	fixedEnc []byte           // fixed, encoded as span attributes
	clock    func() time.Time // a test's end time; nil: time.Now
}

// attrBuf is a reusable attribute list.
type attrBuf struct{ kv []attribute.KeyValue }

// spanAttrs is the most attributes a span gets.
const spanAttrs = 15

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Provider exports the spans; nil: none are started, and the
	// writer's context goes into the headers unchanged.
	Provider trace.TracerProvider
	// Valid and Malformed count the events whose context was read and
	// those whose context was not (relayed without a parent). Required.
	Valid, Malformed prometheus.Counter
	// Database is the PostgreSQL database's name (db.namespace).
	Database string
	// ParentBased says the provider's sampler follows the parent's
	// decision (ParentBased): an event its writer did not sample gets no
	// span, and its record the writer's context unchanged, as when not
	// exporting.
	ParentBased bool
	// Drops, when set, is the sampler's decision whatever the parent
	// (Drops): a dropped event gets no span, and its record the
	// traceparent the SDK's non-recording span would have (a span id of
	// its own, not sampled).
	Drops func(trace.TraceID) bool
}

// NewRelay returns a Relay.
func NewRelay(cfg RelayConfig) *Relay {
	t := &Relay{
		valid: cfg.Valid, malformed: cfg.Malformed,
		fixed: []attribute.KeyValue{
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "send"),
			attribute.String("db.system.name", "postgresql"),
		},
		kind:    trace.WithSpanKind(trace.SpanKindProducer),
		started: time.Now(),
	}
	if cfg.Database != "" {
		t.fixed = append(t.fixed, attribute.String("db.namespace", cfg.Database))
	}
	t.bufs.New = func() any { return &attrBuf{kv: make([]attribute.KeyValue, 0, spanAttrs)} }
	if cfg.Provider != nil {
		t.tracer = cfg.Provider.Tracer(ScopeName)
		t.parentBased, t.drops = cfg.ParentBased, cfg.Drops
		if p, ok := cfg.Provider.(*Provider); ok && p.lean != nil {
			t.lean, t.sampler, t.ids = p.lean, p.sampler, p.ids
			for _, kv := range t.fixed {
				t.fixedEnc = appendKeyValue(t.fixedEnc, fSpanAttributes, kv)
			}
		}
	}
	return t
}

// Record adds the trace headers of event ev (part of tx) to hdrs, the
// headers of its record r being built, and returns them. When exporting,
// it starts the event's span, back-dated to the commit, as a child of the
// event's context, and keeps it in r.Context for Acked; the traceparent
// then names that span. Without a context it does nothing; with a
// malformed one it counts it and adds nothing.
func (t *Relay) Record(tx *decode.Tx, ev *decode.Event, r *kgo.Record, hdrs []kgo.RecordHeader) []kgo.RecordHeader {
	if len(ev.TraceContext) == 0 {
		return hdrs
	}
	tp, ts, ok := Split(ev.TraceContext)
	if !ok {
		// N.B. never a poison event: the event goes out without a parent.
		t.malformed.Inc()
		return hdrs
	}
	t.valid.Inc()
	if t.tracer == nil || t.parentBased && !sampled(tp) {
		// N.B. not exporting (or the writer did not sample the event and
		// the sampler would follow it): the writer's context, as written.
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTraceparent, Value: tp})
		if len(ts) > 0 {
			hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTracestate, Value: ts})
		}
		return hdrs
	}
	sc, _ := spanContext(tp, ts)
	if t.drops != nil && t.drops(sc.TraceID()) {
		// N.B. dropped whatever the parent: what the SDK's non-recording
		// span would put in the headers, without starting it.
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTraceparent, Value: unsampledChild(tp)})
		if len(ts) > 0 {
			hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTracestate, Value: ts})
		}
		return hdrs
	}
	if t.lean != nil {
		return t.recordLean(tx, ev, r, hdrs, ts, sc)
	}
	ctx, span := t.tracer.Start(trace.ContextWithRemoteSpanContext(r.Context, sc), SpanName,
		t.kind, trace.WithTimestamp(tx.CommitTime))
	if span.IsRecording() {
		// N.B. attributes only on sampled spans, and set once, as the span
		// ends (spanRecord.end): set here and then added to, the SDK's
		// attribute slice was allocated twice.
		r.Context = &spanRecord{Context: ctx, span: span, id: ev.ID, key: ev.Key, table: ev.Table,
			replayed: tx.CommitTime.Before(t.started),
			lsn:      tx.CommitLSN, xid: tx.Xid}
	} else {
		r.Context = ctx
	}
	hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTraceparent, Value: traceparent(span.SpanContext())})
	return appendTracestate(hdrs, span.SpanContext().TraceState(), sc.TraceState(), ts)
}

// DeadLettered ends record r's span: the record was dead-lettered (why)
// instead of produced; the dead letter keeps its trace headers.
func (t *Relay) DeadLettered(r *kgo.Record, why error) {
	if t.tracer == nil || r.Context == nil {
		return
	}
	if s, ok := r.Context.(*leanSpan); ok {
		t.endLean(s, r, leanDeadLettered, why.Error())
		return
	}
	sr, ok := r.Context.(*spanRecord)
	if !ok || !sr.span.IsRecording() {
		return
	}
	sr.span.SetStatus(codes.Error, why.Error())
	t.end(sr, r, attribute.Bool("walrelay.dead_lettered", true))
}

// spanRecord is the Context of a record whose event has a recording span:
// the span's (derived from the record's own), and what the span's
// attributes are made of when it ends.
type spanRecord struct {
	context.Context
	span trace.Span
	// id and key are the event's (decode.Event): read as strings where
	// they are (bytesString), not copied.
	id, key []byte
	table   string
	lsn     pglogrepl.LSN
	xid     uint32
	// replayed: committed before this process started.
	replayed bool
}

// end sets the attributes of record r's span sr, with more, and ends it.
func (t *Relay) end(sr *spanRecord, r *kgo.Record, more ...attribute.KeyValue) {
	b := t.bufs.Get().(*attrBuf)
	b.kv = append(b.kv[:0], t.fixed...)
	b.kv = append(b.kv,
		attribute.String("messaging.destination.name", r.Topic),
		attribute.String("messaging.message.id", bytesString(sr.id)),
		attribute.String("messaging.kafka.message.key", bytesString(sr.key)),
		attribute.Int("messaging.message.body.size", len(r.Value)),
		attribute.String("db.collection.name", sr.table),
		attribute.String("db.lsn", lsnString(sr.lsn)),
		attribute.Int64("db.txId", int64(sr.xid)),
	)
	if sr.replayed {
		// N.B. an earlier process may have sent it: a restart sends again
		// what was not confirmed.
		b.kv = append(b.kv, attribute.Bool("walrelay.replayed", true))
	}
	b.kv = append(b.kv, more...)
	sr.span.SetAttributes(b.kv...) // N.B. copied
	t.bufs.Put(b)
	if t.clock != nil {
		sr.span.End(trace.WithTimestamp(t.clock()))
		return
	}
	sr.span.End()
}

// bytesString is b as a string, without a copy. N.B. only for an event's
// bytes: decode gives each event an allocation of its own and nothing
// writes to it after decoding (a record's bytes are not reused), so the
// string stays as it is for as long as a span's attribute holds it.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// lsnString is lsn as PostgreSQL writes it (pglogrepl's LSN.String),
// without fmt.
func lsnString(lsn pglogrepl.LSN) string {
	var b [17]byte
	return string(appendLSN(b[:0], lsn))
}

// appendLSN appends lsn as PostgreSQL writes it.
func appendLSN(b []byte, lsn pglogrepl.LSN) []byte {
	at := len(b)
	b = strconv.AppendUint(b, uint64(lsn>>32), 16)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(uint32(lsn)), 16)
	for i, c := range b[at:] {
		if c >= 'a' {
			b[at+i] = c - 'a' + 'A'
		}
	}
	return b
}

// sampled reports whether valid traceparent tp has the sampled flag (bit
// 0 of its flags, the last hex digit).
func sampled(tp []byte) bool {
	c := tp[54]
	if c >= 'a' {
		c = c - 'a' + 10
	} else {
		c -= '0'
	}
	return c&1 == 1
}

// unsampledChild is the traceparent (version 00) of a child of valid
// traceparent tp that is not sampled: tp's trace id, a random span id.
func unsampledChild(tp []byte) []byte {
	b := make([]byte, 0, 55)
	b = append(b, "00"...)
	b = append(b, tp[2:36]...)
	var sid uint64
	for sid == 0 {
		sid = rand.Uint64()
	}
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], sid)
	b = append(hex.AppendEncode(b, id[:]), '-')
	return append(b, "00"...)
}

// traceparent renders sc as a W3C traceparent (version 00).
func traceparent(sc trace.SpanContext) []byte {
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
}

// Acked ends record r's span: acknowledged (err nil; the partition and
// offset Kafka gave it), or failed (the relay restarts and sends the event
// again, under a new span). A span ended already (DeadLettered, or an
// earlier Acked) is left as it is.
func (t *Relay) Acked(r *kgo.Record, err error) {
	if t.tracer == nil || r.Context == nil {
		return
	}
	if s, ok := r.Context.(*leanSpan); ok {
		if err != nil {
			t.endLean(s, r, leanResent, err.Error())
		} else {
			t.endLean(s, r, leanAcked, "")
		}
		return
	}
	sr, ok := r.Context.(*spanRecord)
	if !ok || !sr.span.IsRecording() {
		return
	}
	if err != nil {
		sr.span.SetStatus(codes.Error, err.Error())
		t.end(sr, r, attribute.Bool("walrelay.resent", true))
		return
	}
	t.end(sr, r,
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition))),
		attribute.Int64("messaging.kafka.offset", r.Offset))
}
