package tracing

import (
	"context"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/walrelay/walrelay/decode"
)

// The lean path of walrelay's span per event: when walrelay exports spans
// (Provider), an event's span is not an SDK span object (its Start,
// SetAttributes and End, the snapshot and the batch span processor were
// 6-9 µs an event, more than the rest of walrelay's work on it) but one
// compact record, leanSpan, built from what the SDK would have decided:
// the provider's sampler asked with the parent's context, the trace id and
// the span's name and kind, the span id from the provider's ID generator,
// the sampler's tracestate. Ended, it waits in a queue of its own
// (leanExporter) and is encoded straight to OTLP (appendLeanSpan).
// TestLeanMatchesSDK checks that the requests decode to what the SDK's
// span sends for the same events.

// leanSpan is the Context of a record whose event has a sampled span on
// the lean path, and the span itself.
type leanSpan struct {
	context.Context // the record's, with parent as its span
	parent          remoteParent
	rel             *Relay
	tid             trace.TraceID
	sid, psid       trace.SpanID
	flags           trace.TraceFlags
	state           trace.TraceState     // the sampler's
	attrs           []attribute.KeyValue // the sampler's, first
	start, end      time.Time
	// id and key are the event's (bytesString's N.B.).
	id, key   []byte
	table     string
	lsn       pglogrepl.LSN
	xid       uint32
	replayed  bool
	topic     string
	size      int
	partition int32
	offset    int64
	outcome   leanOutcome
	status    string // the error's, when outcome is not leanAcked
	// tp is the record's traceparent header value.
	tp    [55]byte
	ended atomic.Bool
}

// leanOutcome is how a span on the lean path ended.
type leanOutcome uint8

const (
	leanAcked        leanOutcome = iota // partition and offset
	leanResent                          // walrelay.resent, error status
	leanDeadLettered                    // walrelay.dead_lettered, error status
)

// recordLean is Record's exporting part on the lean path, for an event
// with traceparent tp and tracestate ts (sc parsed from them): the SDK's
// decision and ids (tracer.newSpan's rules), the headers, and the span's
// record in r.Context when sampled.
func (t *Relay) recordLean(tx *decode.Tx, ev *decode.Event, r *kgo.Record, hdrs []kgo.RecordHeader, ts []byte, sc trace.SpanContext) []kgo.RecordHeader {
	// N.B. the record first: the events that get here are sampled but
	// for a sampler that decides against a sampled writer (its parent
	// context is the record's, without an allocation of its own).
	s := &leanSpan{parent: remoteParent{sc: sc}}
	ctx := trace.ContextWithSpan(r.Context, &s.parent)
	tid := sc.TraceID()
	sid := t.ids.NewSpanID(ctx, tid)
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: SpanName, Kind: trace.SpanKindProducer})
	flags := sc.TraceFlags() &^ trace.FlagsSampled
	var tp []byte
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
		s.Context, s.rel, s.tid, s.sid, s.psid, s.flags = ctx, t, tid, sid, sc.SpanID(), flags
		s.state, s.attrs, s.start = res.Tracestate, res.Attributes, tx.CommitTime
		s.id, s.key, s.table, s.lsn, s.xid = ev.ID, ev.Key, ev.Table, tx.CommitLSN, tx.Xid
		s.replayed = tx.CommitTime.Before(t.started)
		tp = appendTraceparent(s.tp[:0], tid, sid, flags)
		r.Context = s
	} else {
		// N.B. not sampled (a RecordOnly span is never exported either):
		// the header of the SDK's span, nothing to end.
		tp = appendTraceparent(make([]byte, 0, 55), tid, sid, flags)
		r.Context = ctx
	}
	hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderTraceparent, Value: tp})
	return appendTracestate(hdrs, res.Tracestate, sc.TraceState(), ts)
}

// appendTracestate appends the tracestate header of a span whose
// tracestate (the sampler's) is state, child of a parent of tracestate
// parent read from the writer's header ts: ts as written when the sampler
// kept the parent's (the SDK's samplers do), else state.
func appendTracestate(hdrs []kgo.RecordHeader, state, parent trace.TraceState, ts []byte) []kgo.RecordHeader {
	if state.Len() == 0 {
		return hdrs
	}
	v := ts
	if !sameState(state, parent) {
		v = []byte(state.String())
	}
	return append(hdrs, kgo.RecordHeader{Key: HeaderTracestate, Value: v})
}

// sameState reports whether a and b hold the same entries in the same
// order (the sampler returned the parent's tracestate, the usual case:
// the writer's header bytes are then kept as written).
func sameState(a, b trace.TraceState) bool {
	if a.Len() != b.Len() {
		return false
	}
	var keys []string
	a.Walk(func(k, _ string) bool { keys = append(keys, k); return true })
	i, same := 0, true
	b.Walk(func(k, v string) bool {
		same = keys[i] == k && a.Get(k) == v
		i++
		return same
	})
	return same
}

// appendTraceparent appends the W3C traceparent (version 00) of a span.
func appendTraceparent(b []byte, tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(flags & trace.FlagsSampled)})
}

// endLean ends s, record r's span, as outcome (status: the error's text
// when not acknowledged), and queues it for export; a span ended already
// is left as it is.
func (t *Relay) endLean(s *leanSpan, r *kgo.Record, outcome leanOutcome, status string) {
	if !s.ended.CompareAndSwap(false, true) {
		return
	}
	s.end = t.now()
	s.topic, s.size, s.partition, s.offset = r.Topic, len(r.Value), r.Partition, r.Offset
	s.outcome, s.status = outcome, status
	t.lean.end(s)
}

// now is the end time of a span: the clock's (a test's), else the time.
func (t *Relay) now() time.Time {
	if t.clock != nil {
		return t.clock()
	}
	return time.Now()
}

// remoteParent is the writer's span in the sampler's parent context: what
// trace.ContextWithRemoteSpanContext puts there (a span that records
// nothing, of the remote span context sc), kept in the leanSpan rather than
// allocated.
type remoteParent struct {
	embedded.Span
	sc trace.SpanContext
}

func (p *remoteParent) SpanContext() trace.SpanContext        { return p.sc }
func (*remoteParent) IsRecording() bool                       { return false }
func (*remoteParent) End(...trace.SpanEndOption)              {}
func (*remoteParent) AddEvent(string, ...trace.EventOption)   {}
func (*remoteParent) AddLink(trace.Link)                      {}
func (*remoteParent) RecordError(error, ...trace.EventOption) {}
func (*remoteParent) SetStatus(codes.Code, string)            {}
func (*remoteParent) SetName(string)                          {}
func (*remoteParent) SetAttributes(...attribute.KeyValue)     {}
func (*remoteParent) TracerProvider() trace.TracerProvider    { return noop.NewTracerProvider() }
