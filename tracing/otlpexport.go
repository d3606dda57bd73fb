package tracing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// exporter is an OTLP span exporter: the OTLP exporter's client (gRPC or
// HTTP, configured by the OTEL_EXPORTER_OTLP_* environment as the
// exporter configures it: endpoint, headers, TLS, compression, timeout,
// retries) sending spans walrelay encodes itself (appendResourceSpans)
// rather than through the exporter's conversion to protobuf objects. The
// encoded ResourceSpans ride as the unknown fields of an empty message,
// which proto.Marshal writes out as they are.
type exporter struct {
	*otlptrace.Exporter // Start, Shutdown
	client              otlptrace.Client
	// mu: one export at a time (the batch span processor exports one
	// batch at a time anyway), into buf, kept: its size is a batch's, and
	// grown again each time (a sync.Pool's, emptied by every GC) it was
	// 13 % of the bytes BenchmarkRelay/otlp-http-100pct allocated.
	mu  sync.Mutex
	buf []byte
}

// newExporter starts client and returns the exporter over it.
func newExporter(ctx context.Context, client otlptrace.Client) (*exporter, error) {
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, err
	}
	return &exporter{Exporter: exp, client: client}, nil
}

// ExportSpans sends spans in one request.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// N.B. the client marshals the request before UploadTraces returns (a
	// retry marshals it again): buf is free after it.
	var rss []*tracepb.ResourceSpans
	b := e.buf[:0]
	for len(spans) > 0 {
		start := len(b)
		var n int
		b, n = appendResourceSpans(b, spans)
		rs := &tracepb.ResourceSpans{}
		rs.ProtoReflect().SetUnknown(b[start:len(b):len(b)])
		rss = append(rss, rs)
		spans = spans[n:]
	}
	e.buf = b
	if err := e.client.UploadTraces(ctx, rss); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}
