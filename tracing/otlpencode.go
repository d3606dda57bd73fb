package tracing

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP encoding of ended spans, straight from the SDK's ReadOnlySpan
// to protobuf's wire format (opentelemetry-proto's trace/v1, common/v1,
// resource/v1): the same messages the OTLP exporter's conversion builds
// (its tracetransform) and proto.Marshal encodes, without the three
// objects per attribute and the reflection in between (38 % of the CPU
// of BenchmarkRelay/otlp-http-100pct before). TestEncodeMatchesExporter
// checks it against the exporter's own encoding.

// Field numbers of opentelemetry-proto v1.
const (
	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3
	fResourceAttributes      = 1
	fScopeSpansScope         = 1
	fScopeSpansSpans         = 2
	fScopeSpansSchemaURL     = 3
	fScopeName               = 1
	fScopeVersion            = 2
	fScopeAttributes         = 3

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7
	fSpanEnd          = 8
	fSpanAttributes   = 9
	fSpanDroppedAttrs = 10
	fSpanEvents       = 11
	fSpanDroppedEvts  = 12
	fSpanLinks        = 13
	fSpanDroppedLinks = 14
	fSpanStatus       = 15
	fSpanFlags        = 16

	fEventTime         = 1
	fEventName         = 2
	fEventAttributes   = 3
	fEventDroppedAttrs = 4

	fLinkTraceID      = 1
	fLinkSpanID       = 2
	fLinkTraceState   = 3
	fLinkAttributes   = 4
	fLinkDroppedAttrs = 5
	fLinkFlags        = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fArrayValues  = 1
	fKVListValues = 1

	// SpanFlags: the parent-is-remote bit is known, and set.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// appendResourceSpans appends to b the content of one ResourceSpans
// message (not its tag): the first spans, n of them, that share a
// resource and a scope.
func appendResourceSpans(b []byte, spans []sdktrace.ReadOnlySpan) (_ []byte, n int) {
	res, scope := spans[0].Resource(), spans[0].InstrumentationScope()
	n = 1
	for n < len(spans) && spans[n].Resource() == res && spans[n].InstrumentationScope() == scope {
		n++
	}
	if res != nil {
		var at int
		b, at = openMsg(b, fResourceSpansResource)
		b = appendIter(b, fResourceAttributes, res.Iter())
		b = closeMsg(b, at)
	}
	b, ss := openMsg(b, fResourceSpansScopeSpans)
	b = appendScope(b, scope)
	for _, s := range spans[:n] {
		var at int
		b, at = openMsg(b, fScopeSpansSpans)
		b = appendSpan(b, s)
		b = closeMsg(b, at)
	}
	b = appendString(b, fScopeSpansSchemaURL, scope.SchemaURL)
	b = closeMsg(b, ss)
	return appendString(b, fResourceSpansSchemaURL, schemaURL(res)), n
}

func schemaURL(res *resource.Resource) string {
	if res == nil {
		return ""
	}
	return res.SchemaURL()
}

// appendScope appends the ScopeSpans' scope field (none for the zero
// scope, as the exporter does).
func appendScope(b []byte, scope instrumentation.Scope) []byte {
	if scope == (instrumentation.Scope{}) {
		return b
	}
	b, at := openMsg(b, fScopeSpansScope)
	b = appendString(b, fScopeName, scope.Name)
	b = appendString(b, fScopeVersion, scope.Version)
	b = appendIter(b, fScopeAttributes, scope.Attributes.Iter())
	return closeMsg(b, at)
}

// appendSpan appends the content of span s's Span message.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, fSpanTraceID, tid[:])
	b = appendBytes(b, fSpanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, fSpanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, fSpanParentSpanID, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	if k := spanKind(s.SpanKind()); k != 0 {
		b = protowire.AppendTag(b, fSpanKind, protowire.VarintType)
		b = protowire.AppendVarint(b, k)
	}
	b = appendFixed64(b, fSpanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendCount(b, fSpanDroppedAttrs, s.DroppedAttributes())
	for _, e := range s.Events() {
		var at int
		b, at = openMsg(b, fSpanEvents)
		b = appendFixed64(b, fEventTime, unixNano(e.Time.UnixNano()))
		b = appendString(b, fEventName, e.Name)
		for _, kv := range e.Attributes {
			b = appendKeyValue(b, fEventAttributes, kv)
		}
		b = appendCount(b, fEventDroppedAttrs, e.DroppedAttributeCount)
		b = closeMsg(b, at)
	}
	b = appendCount(b, fSpanDroppedEvts, s.DroppedEvents())
	for _, l := range s.Links() {
		var at int
		b, at = openMsg(b, fSpanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, fLinkTraceID, ltid[:])
		b = appendBytes(b, fLinkSpanID, lsid[:])
		// N.B. as the exporter: a link's tracestate is not sent.
		for _, kv := range l.Attributes {
			b = appendKeyValue(b, fLinkAttributes, kv)
		}
		b = appendCount(b, fLinkDroppedAttrs, l.DroppedAttributeCount)
		b = protowire.AppendTag(b, fLinkFlags, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeMsg(b, at)
	}
	b = appendCount(b, fSpanDroppedLinks, s.DroppedLinks())
	// N.B. the exporter always sets the status, unset or not.
	st := s.Status()
	var at int
	b, at = openMsg(b, fSpanStatus)
	b = appendString(b, fStatusMessage, st.Description)
	if c := statusCode(st.Code); c != 0 {
		b = protowire.AppendTag(b, fStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, c)
	}
	b = closeMsg(b, at)
	b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, spanFlags(sc.TraceFlags(), parent))
}

// spanFlags is OTLP's SpanFlags: the W3C trace flags, and whether the
// parent is remote (known).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// spanKind is OTLP's SpanKind of k (0: unspecified).
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// statusCode is OTLP's StatusCode of c (0: unset).
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

// appendIter appends the attributes of it as repeated KeyValue field num.
func appendIter(b []byte, num protowire.Number, it attribute.Iterator) []byte {
	for it.Next() {
		b = appendKeyValue(b, num, it.Attribute())
	}
	return b
}

// appendKeyValue appends kv as KeyValue field num.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := openMsg(b, num)
	b = appendString(b, fKeyValueKey, string(kv.Key))
	var v int
	b, v = openMsg(b, fKeyValueValue)
	b = appendAnyValue(b, kv.Value)
	b = closeMsg(b, v)
	return closeMsg(b, at)
}

// appendAnyValue appends the content of v's AnyValue message. N.B. a
// oneof's field is written even when it holds its zero value.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		b, at := openMsg(b, fAnyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fKVListValues, kv)
		}
		return closeMsg(b, at)
	case attribute.EMPTY:
		return b
	}
	b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// appendArray appends vs as an ArrayValue's AnyValue content.
func appendArray[T any](b []byte, vs []T, value func(T) attribute.Value) []byte {
	b, at := openMsg(b, fAnyArray)
	for _, x := range vs {
		var v int
		b, v = openMsg(b, fArrayValues)
		b = appendAnyValue(b, value(x))
		b = closeMsg(b, v)
	}
	return closeMsg(b, at)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendCount appends a dropped count, clamped to uint32, if not zero.
func appendCount(b []byte, num protowire.Number, n int) []byte {
	if n <= 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(min(int64(n), math.MaxUint32)))
}

// openMsg appends the tag of message field num and a one-byte length to
// be filled by closeMsg, and returns b and where the content starts.
func openMsg(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// closeMsg writes the length of the message opened at at (openMsg): in
// place when it fits a byte, else with the content moved up.
func closeMsg(b []byte, at int) []byte {
	n := len(b) - at
	w := protowire.SizeVarint(uint64(n))
	if w > 1 {
		b = append(b, make([]byte, w-1)...)
		copy(b[at+w-1:], b[at:at+n])
	}
	protowire.AppendVarint(b[at-1:at-1], uint64(n))
	return b
}
