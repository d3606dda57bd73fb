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
