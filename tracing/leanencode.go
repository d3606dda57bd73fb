package tracing

import (
	"strconv"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP encoding of the lean path's spans (leanSpan): the messages
// appendResourceSpans writes for the SDK's span of the same event, with
// what never changes (the resource, the scope, the name and kind, the key
// of every attribute, the constant attributes: Relay.fixedEnc) encoded
// once as bytes.

// leanEncoding is the fixed part of the lean path's requests.
type leanEncoding struct {
	resource  []byte // the ResourceSpans' resource field; nil: none
	resSchema string
	scope     []byte // the ScopeSpans' scope field
	scSchema  string
}

// newLeanEncoding encodes res and walrelay's scope (a Tracer(ScopeName)'s).
func newLeanEncoding(res *resource.Resource) *leanEncoding {
	e := &leanEncoding{resSchema: schemaURL(res)}
	if res != nil {
		b, at := openMsg(nil, fResourceSpansResource)
		b = appendIter(b, fResourceAttributes, res.Iter())
		e.resource = closeMsg(b, at)
	}
	scope := instrumentation.Scope{Name: ScopeName}
	e.scope, e.scSchema = appendScope(nil, scope), scope.SchemaURL
	return e
}

// appendBatch appends the content of one ResourceSpans message holding
// spans.
func (e *leanEncoding) appendBatch(b []byte, spans []*leanSpan) []byte {
	b = append(b, e.resource...)
	b, ss := openWide(b, fResourceSpansScopeSpans, 3)
	b = append(b, e.scope...)
	for _, s := range spans {
		var at int
		b, at = openWide(b, fScopeSpansSpans, 2)
		b = appendLeanSpan(b, s)
		b = closeWide(b, at, 2)
	}
	b = appendString(b, fScopeSpansSchemaURL, e.scSchema)
	b = closeWide(b, ss, 3)
	return appendString(b, fResourceSpansSchemaURL, e.resSchema)
}

// leanNameKind is the Span's name (SpanName) and kind (producer) fields.
var leanNameKind = protowire.AppendVarint(protowire.AppendTag(
	appendString(nil, fSpanName, SpanName), fSpanKind, protowire.VarintType), spanKind(trace.SpanKindProducer))

// The KeyValue key fields of the attributes the lean path sets per span.
var (
	kTopic     = keyField("messaging.destination.name")
	kMessageID = keyField("messaging.message.id")
	kKey       = keyField("messaging.kafka.message.key")
	kBodySize  = keyField("messaging.message.body.size")
	kTable     = keyField("db.collection.name")
	kLSN       = keyField("db.lsn")
	kTxID      = keyField("db.txId")
	kReplayed  = keyField("walrelay.replayed")
	kPartition = keyField("messaging.destination.partition.id")
	kOffset    = keyField("messaging.kafka.offset")
	kResent    = keyField("walrelay.resent")
	kDead      = keyField("walrelay.dead_lettered")
)

func keyField(k string) []byte { return appendString(nil, fKeyValueKey, k) }

// appendLeanSpan appends the content of s's Span message: the fields, in
// the order, of appendSpan for the SDK's span (Relay.end's attributes).
func appendLeanSpan(b []byte, s *leanSpan) []byte {
	b = appendBytes(b, fSpanTraceID, s.tid[:])
	b = appendBytes(b, fSpanSpanID, s.sid[:])
	if s.state.Len() > 0 {
		b = appendString(b, fSpanTraceState, s.state.String())
	}
	b = appendBytes(b, fSpanParentSpanID, s.psid[:])
	b = append(b, leanNameKind...)
	b = appendFixed64(b, fSpanStart, unixNano(s.start.UnixNano()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.end.UnixNano()))
	for _, kv := range s.attrs {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = append(b, s.rel.fixedEnc...)
	b = appendStrAttr(b, kTopic, s.topic)
	b = appendStrAttr(b, kMessageID, s.id)
	b = appendStrAttr(b, kKey, s.key)
	b = appendIntAttr(b, kBodySize, int64(s.size))
	b = appendStrAttr(b, kTable, s.table)
	var lsn [17]byte
	b = appendStrAttr(b, kLSN, appendLSN(lsn[:0], s.lsn))
	b = appendIntAttr(b, kTxID, int64(s.xid))
	if s.replayed {
		b = appendBoolAttr(b, kReplayed, true)
	}
	code := uint64(2) // error
	switch s.outcome {
	case leanAcked:
		var p [11]byte
		b = appendStrAttr(b, kPartition, strconv.AppendInt(p[:0], int64(s.partition), 10))
		b = appendIntAttr(b, kOffset, s.offset)
		code = 0
	case leanResent:
		b = appendBoolAttr(b, kResent, true)
	case leanDeadLettered:
		b = appendBoolAttr(b, kDead, true)
	}
	// N.B. the exporter always sets the status, unset or not.
	b, at := openMsg(b, fSpanStatus)
	b = appendString(b, fStatusMessage, s.status)
	if code != 0 {
		b = protowire.AppendTag(b, fStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, code)
	}
	b = closeMsg(b, at)
	b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
	// N.B. the parent is the writer's: remote.
	return protowire.AppendFixed32(b, uint32(s.flags)|flagHasIsRemote|flagIsRemote)
}

// appendStrAttr appends a span attribute (KeyValue) of key field key and
// string value v.
func appendStrAttr[T string | []byte](b, key []byte, v T) []byte {
	anyLen := 1 + protowire.SizeBytes(len(v))
	b = appendAttrHead(b, key, anyLen)
	b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendIntAttr appends a span attribute of key field key and int value v.
func appendIntAttr(b, key []byte, v int64) []byte {
	b = appendAttrHead(b, key, 1+protowire.SizeVarint(uint64(v)))
	b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendBoolAttr appends a span attribute of key field key and bool v.
func appendBoolAttr(b, key []byte, v bool) []byte {
	b = appendAttrHead(b, key, 2)
	b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(v))
}

// appendAttrHead appends a KeyValue's tag, length and key, and its value's
// tag and length, for an AnyValue of anyLen bytes.
func appendAttrHead(b, key []byte, anyLen int) []byte {
	b = protowire.AppendTag(b, fSpanAttributes, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(key)+1+protowire.SizeBytes(anyLen)))
	b = append(b, key...)
	b = protowire.AppendTag(b, fKeyValueValue, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(anyLen))
}

// openWide is openMsg with w bytes kept for the length: a span's message
// is 128 bytes to 16 KiB (two), a batch's under 2 MiB (three), and
// closeWide writes the length in place instead of moving the content.
func openWide(b []byte, num protowire.Number, w int) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, make([]byte, w)...)
	return b, len(b)
}

// closeWide writes the length of the message opened at at (openWide with
// w): in place when it takes w bytes, else as closeMsg does.
func closeWide(b []byte, at, w int) []byte {
	n := len(b) - at
	if protowire.SizeVarint(uint64(n)) == w {
		protowire.AppendVarint(b[at-w:at-w], uint64(n))
		return b
	}
	// N.B. a length of another width: drop the bytes kept but one, and
	// let closeMsg place it.
	copy(b[at-w+1:], b[at:])
	return closeMsg(b[:len(b)-w+1], at-w+1)
}
