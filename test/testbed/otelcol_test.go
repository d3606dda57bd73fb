package testbed

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestCollectorReceivesOTLP: the Collector the bed builds and starts
// takes spans over OTLP gRPC and HTTP and writes them to its file, where
// Spans reads them back with their ids, names and times.
func TestCollectorReceivesOTLP(t *testing.T) {
	c := StartCollector(t)
	ctx := context.Background()
	grpcExp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPC), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	httpExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTP), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, exp := range map[string]sdktrace.SpanExporter{"over-grpc": grpcExp, "over-http": httpExp} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		start := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
		_, span := tp.Tracer("testbed").Start(ctx, name, trace.WithTimestamp(start))
		span.End(trace.WithTimestamp(start.Add(time.Second)))
		want[name] = span.SpanContext().TraceID().String()
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spans := c.WaitSpans(t, 30*time.Second, func(s []Span) bool { return len(s) >= 2 })
	for _, s := range spans {
		if want[s.Name] != s.TraceID {
			t.Errorf("span %q: trace id %s, want %s", s.Name, s.TraceID, want[s.Name])
		}
		if !s.Start.Equal(time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)) || s.End.Sub(s.Start) != time.Second {
			t.Errorf("span %q: %s to %s", s.Name, s.Start, s.End)
		}
		delete(want, s.Name)
	}
	if len(want) > 0 {
		t.Errorf("spans not received: %v", want)
	}
}
