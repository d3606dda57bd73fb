package inbox

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The consumer span: each attempt at a record runs in a span of kind
// consumer ("process TOPIC", OpenTelemetry's messaging conventions), a
// child of the record's W3C traceparent header (walrelay writes it from
// the outbox row's trace context), from the record's turn to the database
// commit. The Handler's ctx carries it, so its own spans and queries join
// the writer's trace. Spans go to OpenTelemetry's global tracer provider
// (otel.SetTracerProvider): without one they cost nothing and go nowhere,
// as with any instrumented Go library.

const tracerScope = "github.com/walrelay/walrelay/inbox"

// headerCarrier reads a record's headers for the W3C propagator.
type headerCarrier []kgo.RecordHeader

func (h headerCarrier) Get(key string) string {
	for _, x := range h {
		if x.Key == key {
			return string(x.Value)
		}
	}
	return ""
}

func (h headerCarrier) Set(string, string) {} // never injected into

func (h headerCarrier) Keys() []string {
	keys := make([]string, len(h))
	for i, x := range h {
		keys[i] = x.Key
	}
	return keys
}

// recordSpan is one attempt's span.
type recordSpan struct{ trace.Span }

// startSpan starts the span of an attempt at record r (message id id), a
// child of the record's traceparent, and returns ctx carrying it.
func (c *Consumer) startSpan(ctx context.Context, r *kgo.Record, id []byte) (context.Context, recordSpan) {
	ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(r.Headers))
	ctx, span := otel.GetTracerProvider().Tracer(tracerScope).Start(ctx, "process "+r.Topic, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.destination.name", r.Topic),
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition))),
			attribute.Int64("messaging.kafka.offset", r.Offset),
			attribute.String("messaging.consumer.group.name", c.cfg.Group),
			attribute.String("messaging.message.id", string(id)),
			attribute.String("messaging.kafka.message.key", string(r.Key)),
		)
	}
	return ctx, recordSpan{span}
}

// duplicate marks the span of an attempt whose id the inbox table already
// held: the Handler is skipped (OnDuplicate runs instead).
func (s recordSpan) duplicate(dup bool) {
	if dup && s.IsRecording() {
		s.SetAttributes(attribute.Bool("messaging.inbox.duplicate", true))
	}
}

// end ends the span once the attempt committed (err nil) or failed.
func (s recordSpan) end(err error) {
	if err != nil && s.IsRecording() {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}
