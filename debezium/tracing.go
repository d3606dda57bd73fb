package debezium

import (
	"fmt"
	"strings"
)

// The router's tracing options (Debezium's ActivateTracingSpan fields on
// the EventRouter) and what each becomes in walrelay (docs/tracing.md).
const (
	tracingContextField = "tracing.span.context.field"      // --trace-context-column
	tracingOperation    = "tracing.operation.name"          // a note: walrelay has no read span
	tracingContextOnly  = "tracing.with.context.field.only" // walrelay's behaviour either way
)

// importTracing maps the router's tracing.* options (p: the router's
// prefix, transforms.NAME.): the context column to --trace-context-column;
// tracing.with.context.field.only, true or false, to nothing (Debezium
// traces an event only when its context value is set, and so does
// walrelay); tracing.operation.name to a note. Span export itself is
// configured the OpenTelemetry way, with OTEL_* variables, as the Java
// agent on a Connect worker is.
func importTracing(imp *Result, props map[string]string, p string, get func(k, def string) string, bad func(k, why string), set func(f, v string)) {
	for k := range props {
		if !strings.HasPrefix(k, p+"tracing.") {
			continue
		}
		switch strings.TrimPrefix(k, p) {
		case tracingContextField, tracingOperation, tracingContextOnly:
		default:
			bad(k, fmt.Sprintf("not a tracing option of the router (%s, %s, %s)", tracingContextField, tracingOperation, tracingContextOnly))
		}
	}
	if v, ok := props[p+tracingContextField]; ok {
		get(p+tracingContextField, "")
		if v == "" {
			bad(p+tracingContextField, "empty: name the column (Debezium's default is tracingspancontext)")
		} else {
			set("trace-context-column", v)
		}
	}
	switch v := get(p+tracingContextOnly, "false"); v {
	case "true", "false":
	default:
		bad(p+tracingContextOnly, "want true or false")
	}
	if v, ok := props[p+tracingOperation]; ok {
		get(p+tracingOperation, "")
		imp.Notes = append(imp.Notes, fmt.Sprintf("%s%s=%s: walrelay emits one span per event, db-log-write as Debezium's (from the commit to Kafka's acknowledgement, the parent of the record's traceparent), and no processing span of that name; spans are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/tracing.md)", p, tracingOperation, v))
	}
}
