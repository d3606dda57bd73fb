package tracing

import (
	"encoding/hex"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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
	tracer             trace.Tracer // nil: not exporting
	parentBased        bool
	valid, malformed   prometheus.Counter
	system, opType     attribute.KeyValue
	dbSystem, database attribute.KeyValue
}

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
}

// NewRelay returns a Relay.
func NewRelay(cfg RelayConfig) *Relay {
	t := &Relay{
		valid: cfg.Valid, malformed: cfg.Malformed,
		system:   attribute.String("messaging.system", "kafka"),
		opType:   attribute.String("messaging.operation.type", "send"),
		dbSystem: attribute.String("db.system.name", "postgresql"),
		database: attribute.String("db.namespace", cfg.Database),
	}
	if cfg.Provider != nil {
		t.tracer = cfg.Provider.Tracer(ScopeName)
		t.parentBased = cfg.ParentBased
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
	ctx, span := t.tracer.Start(trace.ContextWithRemoteSpanContext(r.Context, sc), SpanName,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(tx.CommitTime))
	if span.IsRecording() {
		// N.B. attributes only on sampled spans: an unsampled event costs
		// a span context, not its attributes.
		span.SetAttributes(t.system, t.opType,
			attribute.String("messaging.operation.name", "send"),
			attribute.String("messaging.destination.name", r.Topic),
			attribute.String("messaging.message.id", string(ev.ID)),
			attribute.String("messaging.kafka.message.key", string(ev.Key)),
			t.dbSystem,
			attribute.String("db.collection.name", ev.Table),
			attribute.String("db.lsn", tx.CommitLSN.String()),
			attribute.Int64("db.txId", int64(tx.Xid)),
		)
		if t.database.Value.AsString() != "" {
			span.SetAttributes(t.database)
		}
	}
	r.Context = ctx
	hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTraceparent, Value: traceparent(span.SpanContext())})
	// N.B. the SDK gives the child its parent's tracestate: the writer's.
	if span.SpanContext().TraceState().Len() > 0 {
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTracestate, Value: ts})
	}
	return hdrs
}

// DeadLettered ends record r's span: the record was dead-lettered (why)
// instead of produced; the dead letter keeps its trace headers.
func (t *Relay) DeadLettered(r *kgo.Record, why error) {
	if t.tracer == nil || r.Context == nil {
		return
	}
	span := trace.SpanFromContext(r.Context)
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, why.Error())
	span.SetAttributes(attribute.Bool("walrelay.dead_lettered", true))
	span.End()
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
	span := trace.SpanFromContext(r.Context)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.Bool("walrelay.resent", true))
	} else {
		span.SetAttributes(
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition))),
			attribute.Int64("messaging.kafka.offset", r.Offset),
		)
	}
	span.End()
}
