// Package tracing carries each outbox event's trace context from the
// writing transaction into its Kafka record, and traces the relay with
// OpenTelemetry's Go SDK.
//
// Input: the event's trace-context column (Debezium's tracingspancontext, a
// java.util.Properties text, or a plain W3C traceparent) and the OTEL_*
// environment (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, ...). Output: W3C traceparent and tracestate headers on
// the record and, when exporting, one span per event ("db-log-write", as
// Debezium names it) from the commit time to Kafka's acknowledgement,
// child of the writer's span, sent over OTLP (gRPC or HTTP).
// Invariant: a trace context never stops an event: a malformed one is
// counted and the event is relayed without a parent; without OTEL_*
// configuration nothing is exported and the writer's context is copied
// unchanged; when exporting, no position is confirmed before the spans of
// the events below it are exported (Gate), or a second has passed; every
// sampled span ended is counted exported, dropped or failed (Spans).
package tracing
