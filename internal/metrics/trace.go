package metrics

import "github.com/prometheus/client_golang/prometheus"

// Trace-context outcomes, the label of walrelay_trace_contexts_total.
const (
	TraceContextValid     = "valid"
	TraceContextMalformed = "malformed"
)

// newTraceContexts registers walrelay_trace_contexts_total on reg, both
// outcomes shown from the start.
func newTraceContexts(reg *prometheus.Registry) *prometheus.CounterVec {
	return newOutcomes(reg, "walrelay_trace_contexts_total", "Events with a trace-context column value (--trace-context-column), by outcome: valid (its traceparent carried into the record), malformed (relayed without a parent: the writer's value is not a traceparent or a java.util.Properties text holding one).",
		TraceContextValid, TraceContextMalformed)
}

// Outcomes of the span exports walrelay waits for before it confirms a
// position, the label of walrelay_trace_flushes_total.
const (
	TraceFlushExported = "exported"
	TraceFlushGaveUp   = "gave_up"
	TraceFlushLossy    = "spans_lost"
)

// newTraceFlushes registers walrelay_trace_flushes_total on reg, both
// outcomes shown from the start.
func newTraceFlushes(reg *prometheus.Registry) *prometheus.CounterVec {
	return newOutcomes(reg, "walrelay_trace_flushes_total", "Exports of spans walrelay waits for before it confirms a position to PostgreSQL (only when exporting spans), by outcome: exported, gave_up (failed or took over 1 s: the position was confirmed anyway, and a crash before those spans are exported loses them), spans_lost (the flush ran, but spans were dropped or failed since the previous one: walrelay_trace_spans_total).",
		TraceFlushExported, TraceFlushGaveUp, TraceFlushLossy)
}

// What became of the sampled spans walrelay ended, the label of
// walrelay_trace_spans_total.
const (
	TraceSpanExported = "exported"
	TraceSpanDropped  = "dropped"
	TraceSpanFailed   = "failed"
)

// newTraceSpans registers walrelay_trace_spans_total on reg, every
// outcome shown from the start.
func newTraceSpans(reg *prometheus.Registry) *prometheus.CounterVec {
	return newOutcomes(reg, "walrelay_trace_spans_total", "Sampled spans walrelay ended (only when exporting spans), by outcome: exported (the Collector accepted the request), dropped (the batch span processor's queue was full while an export ran: raise OTEL_BSP_MAX_QUEUE_SIZE), failed (the OTLP export failed after its retries).",
		TraceSpanExported, TraceSpanDropped, TraceSpanFailed)
}

// newOutcomes registers counter name by label outcome on reg, each of
// outcomes shown (at 0) from the start.
func newOutcomes(reg *prometheus.Registry, name, help string, outcomes ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"outcome"})
	reg.MustRegister(c)
	for _, o := range outcomes {
		c.WithLabelValues(o)
	}
	return c
}
