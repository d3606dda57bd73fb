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
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "walrelay_trace_contexts_total",
		Help: "Events with a trace-context column value (--trace-context-column), by outcome: valid (its traceparent carried into the record), malformed (relayed without a parent: the writer's value is not a traceparent or a java.util.Properties text holding one).",
	}, []string{"outcome"})
	reg.MustRegister(c)
	c.WithLabelValues(TraceContextValid)
	c.WithLabelValues(TraceContextMalformed)
	return c
}

// Outcomes of the span exports walrelay waits for before it confirms a
// position, the label of walrelay_trace_flushes_total.
const (
	TraceFlushExported = "exported"
	TraceFlushGaveUp   = "gave_up"
)

// newTraceFlushes registers walrelay_trace_flushes_total on reg, both
// outcomes shown from the start.
func newTraceFlushes(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "walrelay_trace_flushes_total",
		Help: "Exports of spans walrelay waits for before it confirms a position to PostgreSQL (only when exporting spans), by outcome: exported, gave_up (failed or took over 1 s: the position was confirmed anyway, and a crash before those spans are exported loses them).",
	}, []string{"outcome"})
	reg.MustRegister(c)
	c.WithLabelValues(TraceFlushExported)
	c.WithLabelValues(TraceFlushGaveUp)
	return c
}
