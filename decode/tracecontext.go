package decode

import "github.com/walrelay/walrelay/internal/pgoutput"

// The trace-context column (Config.TraceContextColumn): an optional column
// of the outbox whose text the event carries, unread, to the sink (package
// tracing parses it). Optional: a table without it relays its events
// without a context, and no check at start asks for it; a value that is
// not text (binary) or NULL is no context either. Never a poison reason:
// a malformed context must not stop an event.

// DefaultTraceContextColumn is Debezium's tracing.span.context.field
// default, the column the Quarkus outbox extension writes.
const DefaultTraceContextColumn = "tracingspancontext"

// TraceColumn is the configured trace-context column (with --source
// messages, the content's field); "" for none.
func (c Config) TraceColumn() string { return c.traceColumn() }

// traceColumn is the configured trace-context column; "" for none.
func (c Config) traceColumn() string {
	switch c.TraceContextColumn {
	case "":
		return DefaultTraceContextColumn
	case "-":
		return ""
	}
	return c.TraceContextColumn
}

// traceIndex is the index of the trace-context column among columns, -1
// when there is none or its type holds no text.
func (d *Decoder) traceIndex(columns []pgoutput.Column) int {
	name := d.cfg.traceColumn()
	if name == "" {
		return -1
	}
	for i, c := range columns {
		if c.Name == name {
			if c.TypeOID == oidBytea {
				return -1
			}
			return i
		}
	}
	return -1
}

// traceData is the trace context of a row of rel, as sent (nil: none).
func traceData(rel *relation, cols []pgoutput.TupleCol) []byte {
	if rel.traceIdx < 0 || rel.traceIdx >= len(cols) {
		return nil
	}
	if c := cols[rel.traceIdx]; c.Kind == pgoutput.KindText && len(c.Data) > 0 {
		return c.Data
	}
	return nil
}
