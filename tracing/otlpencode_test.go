package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestEncodeMatchesExporter: the request walrelay's exporter sends (its
// own encoding) decodes to the same spans, resources and scopes as the
// request the OTLP exporter sends for the same ended spans: every
// attribute type, events, links, status, tracestate, remote and local
// parents, spans of two scopes interleaved, and a batch with spans over
// 127 bytes and a scope over 16 KiB (lengths of more than one byte).
func TestEncodeMatchesExporter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "walrelay-test"), attribute.Int("n", 7))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	a := tp.Tracer(ScopeName, trace.WithInstrumentationVersion("v1.2.3"), trace.WithInstrumentationAttributes(attribute.Bool("scoped", true)))
	b := tp.Tracer("other", trace.WithSchemaURL("https://opentelemetry.io/schemas/1.26.0"))
	parent, ok := Parse([]byte("traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate=congo=t61rcWkgMzE"))
	if !ok {
		t.Fatal("parse the parent")
	}
	big := string(bytes.Repeat([]byte("x"), 300))
	for i := range 120 {
		tr := a
		if i%3 == 1 {
			tr = b
		}
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
		if i%5 == 0 {
			ctx = context.Background()
		}
		_, s := tr.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKind(i%6)),
			trace.WithTimestamp(time.Unix(1765000000, int64(i))),
			trace.WithLinks(trace.Link{SpanContext: parent, Attributes: []attribute.KeyValue{attribute.String("l", "k")}}))
		s.SetAttributes(
			attribute.String("s", "v"), attribute.String("empty", ""), attribute.String("big", big),
			attribute.Bool("t", true), attribute.Bool("f", false),
			attribute.Int64("i", int64(i)-60), attribute.Int64("zero", 0), attribute.Float64("d", 1.5), attribute.Float64("dz", 0),
			attribute.StringSlice("ss", []string{"a", "", "c"}), attribute.Int64Slice("is", []int64{-1, 0, 1 << 40}),
			attribute.Float64Slice("ds", []float64{0.25}), attribute.BoolSlice("bs", []bool{true, false}),
			attribute.ByteSlice("bytes", []byte{0, 1, 2}),
			attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(3)),
			attribute.Map("m", attribute.String("k", "v"), attribute.Int("n", 1)),
			attribute.KeyValue{Key: "nothing", Value: attribute.Value{}},
		)
		s.AddEvent("ev", trace.WithTimestamp(time.Unix(1765000001, 0)), trace.WithAttributes(attribute.Int("e", i)))
		switch i % 3 {
		case 0:
			s.SetStatus(codes.Error, "broker said no")
		case 1:
			s.SetStatus(codes.Ok, "")
		}
		s.End(trace.WithTimestamp(time.Unix(1765000002, int64(i))))
	}
	spans := rec.Ended()

	theirs, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(capture(t, "theirs").URL), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(capture(t, "ours").URL), otlptracehttp.WithInsecure()))
	if err != nil {
		t.Fatal(err)
	}
	for _, exp := range []sdktrace.SpanExporter{theirs, ours} {
		if err := exp.ExportSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
		if err := exp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want, got := flatten(t, captured["theirs"]), flatten(t, captured["ours"])
	if len(want) != len(spans) || len(got) != len(want) {
		t.Fatalf("%d spans ended; the exporter sent %d, walrelay's %d", len(spans), len(want), len(got))
	}
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			t.Fatalf("span %d differs:\nexporter: %v\nwalrelay: %v", i, want[i], got[i])
		}
	}
}

// TestExportError: a request the receiver refuses is the export's error.
func TestExportError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	exp, err := newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(srv.URL), otlptracehttp.WithInsecure()))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	rec := tracetest.NewSpanRecorder()
	_, s := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(ScopeName).Start(context.Background(), SpanName)
	s.End()
	err = exp.ExportSpans(context.Background(), rec.Ended())
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("export to a receiver answering 400: %v, want its error", err)
	}
}

var (
	capturedMu sync.Mutex
	captured   = map[string][][]byte{}
)

// capture is an OTLP/HTTP receiver that keeps the bodies it is sent under
// name, from none (a test run again with -count reads its own run's).
func capture(t *testing.T, name string) *httptest.Server {
	capturedMu.Lock()
	delete(captured, name)
	capturedMu.Unlock()
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		capturedMu.Lock()
		captured[name] = append(captured[name], body)
		capturedMu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// flatSpan is one span with its resource and scope, as a receiver reads
// them.
type flatSpan = tracepb.ResourceSpans

// flatten decodes requests into one ResourceSpans per span (its resource,
// its scope, the span), ordered by span id: how the spans are grouped
// into messages is the sender's choice.
func flatten(t *testing.T, bodies [][]byte) []*flatSpan {
	var out []*flatSpan
	for _, body := range bodies {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, &flatSpan{
						Resource:  proto.Clone(orEmpty(rs.Resource)).(*resourcepb.Resource),
						SchemaUrl: rs.SchemaUrl,
						ScopeSpans: []*tracepb.ScopeSpans{{
							Scope:     proto.Clone(orEmptyScope(ss.Scope)).(*commonpb.InstrumentationScope),
							SchemaUrl: ss.SchemaUrl,
							Spans:     []*tracepb.Span{s},
						}},
					})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return bytes.Compare(out[i].ScopeSpans[0].Spans[0].SpanId, out[j].ScopeSpans[0].Spans[0].SpanId) < 0
	})
	return out
}

func orEmpty(r *resourcepb.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return r
}

func orEmptyScope(s *commonpb.InstrumentationScope) *commonpb.InstrumentationScope {
	if s == nil {
		return &commonpb.InstrumentationScope{}
	}
	return s
}
