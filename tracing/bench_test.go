package tracing

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/walrelay/walrelay/decode"
)

// BenchmarkRelay is the per-event cost of carrying a trace context
// through the sink (Record, then Acked), the span exported through the
// SDK's batch processor to an exporter that drops it: with no span export
// configured (the writer's context copied into the headers), and
// exporting with the writers sampling every event, one in ten or none
// (parent-based sampling follows them), and with a ratio sampler of 0
// (traceidratio, not following the writers: tracing.Drops). The figures
// are in docs/tracing.md ("Cost"); make bench's tracing workload runs a
// whole relay.
func BenchmarkRelay(b *testing.B) {
	contexts := make([][]byte, 100)
	for i := range contexts {
		flags := "00"
		if i%10 == 0 {
			flags = "01"
		}
		contexts[i] = fmt.Appendf(nil, "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-%016x-%s\n", i+1, flags)
	}
	all := make([][]byte, len(contexts))
	none := make([][]byte, len(contexts))
	for i := range all {
		all[i] = fmt.Appendf(nil, "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-%016x-01\n", i+1)
		none[i] = fmt.Appendf(nil, "#Sun Dec 06 06:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-%016x-00\n", i+1)
	}
	// N.B. a Collector that reads and drops what it is sent, so that the
	// OTLP exporter's encoding and HTTP requests count.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	grpcSink := grpcDiscard(b)
	for _, bc := range []struct {
		name      string
		exporting bool
		// otlp: the exporter, "" the no-op one; "http" and "grpc" walrelay's
		// (NewProvider's), "http-sdk" the OTLP/HTTP exporter itself (its
		// conversion to protobuf objects: walrelay's before).
		otlp     string
		contexts [][]byte
		// ratio0: the sampler is traceidratio 0 (not parent-based): a
		// span is started for every event, and none is sampled.
		ratio0 bool
	}{
		{"not-exporting", false, "", all, false},
		{"exporting-unsampled-parent", true, "", none, false},
		{"exporting-unsampled-ratio0", true, "", all, true},
		{"exporting-100pct", true, "", all, false},
		{"exporting-10pct", true, "", contexts, false},
		{"otlp-http-100pct", true, "http", all, false},
		{"otlp-grpc-100pct", true, "grpc", all, false},
		{"otlp-http-sdk-100pct", true, "http-sdk", all, false},
		{"lean-http-100pct", true, "lean-http", all, false},
		{"lean-grpc-100pct", true, "lean-grpc", all, false},
		{"lean-http-10pct", true, "lean-http", contexts, false},
		{"lean-http-100pct-bigqueue", true, "lean-http-bigqueue", all, false},
		{"lean-grpc-100pct-bigqueue", true, "lean-grpc-bigqueue", all, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			valid, malformed := counters()
			var exported atomic.Int64
			var spans *Spans
			var flush func(context.Context) error
			cfg := RelayConfig{Valid: valid, Malformed: malformed}
			if bc.exporting {
				// N.B. a provider per run: one shut down would start spans
				// that record nothing.
				var exp sdktrace.SpanExporter = tracetest.NewNoopExporter()
				var opts []sdktrace.BatchSpanProcessorOption
				var err error
				switch bc.otlp {
				case "lean-http", "lean-grpc", "lean-http-bigqueue", "lean-grpc-bigqueue":
					// N.B. NewProvider's: walrelay's span on the lean path.
					var client otlptrace.Client = otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(sink.URL), otlptracehttp.WithInsecure())
					if strings.HasPrefix(bc.otlp, "lean-grpc") {
						client = otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(grpcSink), otlptracegrpc.WithInsecure())
					}
					var lexp *exporter
					if lexp, err = newExporter(context.Background(), client); err != nil {
						b.Fatal(err)
					}
					spans = newSpans()
					getenv := env()
					if strings.HasSuffix(bc.otlp, "bigqueue") {
						// N.B. the loop ends spans at 200,000-400,000 a
						// second, ten times a relay's drain: a queue that
						// never fills, so that every span is encoded and
						// sent (and counted) rather than dropped.
						getenv = env("OTEL_BSP_MAX_QUEUE_SIZE", "4194304", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2048")
					}
					lp := newProviderFrom(lexp, providerParts{res: resource.Default(), sampler: samplerFromEnv(env()), ids: randomIDs{}}, spans, getenv)
					defer lp.Shutdown(context.Background())
					cfg.Provider, cfg.ParentBased, flush = lp, true, lp.ForceFlush
				case "http":
					exp, err = newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(sink.URL), otlptracehttp.WithInsecure()))
				case "grpc":
					exp, err = newExporter(context.Background(), otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(grpcSink), otlptracegrpc.WithInsecure()))
				case "http-sdk":
					exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL), otlptracehttp.WithInsecure())
				}
				if err != nil {
					b.Fatal(err)
				}
				if bc.otlp != "" {
					opts = batchDefaults(func(string) string { return "" })
				}
				if flush == nil {
					exp = counted{exp, &exported}
					popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp, opts...)}
					if bc.otlp == "http" || bc.otlp == "grpc" {
						// N.B. NewProvider's processor: walrelay's drop
						// decision and counts in front of the SDK's.
						spans = newSpans()
						popts = []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(spans.batcher(exp, func(string) string { return "" }))}
					}
					if bc.ratio0 {
						popts = append(popts, sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0)))
					}
					tp := sdktrace.NewTracerProvider(popts...)
					defer tp.Shutdown(context.Background())
					cfg.Provider, cfg.ParentBased, flush = tp, !bc.ratio0, tp.ForceFlush
					if bc.ratio0 {
						cfg.Drops = Drops(ratioEnv("0"))
					}
				}
			}
			rl := NewRelay(cfg)
			tx := testTx()
			ev := &decode.Event{ID: []byte("8a1e7ad2-4a6e-4c1b-9a61-3f0c3a7e1f55"), Key: []byte("o-1"), Table: "public.outbox"}
			hdrs := make([]kgo.RecordHeader, 0, 8)
			b.ReportAllocs()
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				ev.TraceContext = bc.contexts[i%len(bc.contexts)]
				i++
				r := &kgo.Record{Topic: "outbox.event.order", Partition: int32(i % 3), Offset: int64(i), Context: context.Background()}
				hdrs = rl.Record(tx, ev, r, hdrs[:0])
				rl.Acked(r, nil)
			}
			// N.B. the process's CPU time, the batch processor's goroutine
			// and the garbage collector's included: wall time per op on a
			// busy machine says little. cpu-ns/op-flushed adds the export
			// of the spans still queued when the loop ends.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			if bc.exporting {
				// N.B. the batch processor drops spans when its queue is
				// full (an exporter starved of CPU): then a span cost less.
				b.StopTimer()
				_ = flush(context.Background())
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op-flushed")
				if strings.HasPrefix(bc.otlp, "lean") {
					exported.Store(int64(testutil.ToFloat64(spans.Exported)))
				}
				b.ReportMetric(float64(exported.Load())/float64(b.N), "exported/op")
				if spans != nil {
					b.ReportMetric(testutil.ToFloat64(spans.Dropped)/float64(b.N), "dropped/op")
				}
			}
		})
	}
}

// grpcDiscard is an OTLP/gRPC receiver that drops what it is sent; its
// address.
func grpcDiscard(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// N.B. the requests are not decoded (discardCodec), as the HTTP
	// receiver does not decode them: the process's CPU is the sender's.
	srv := grpc.NewServer(grpc.ForceServerCodec(discardCodec{}))
	coltracepb.RegisterTraceServiceServer(srv, discardTraces{})
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	return ln.Addr().String()
}

type discardTraces struct {
	coltracepb.UnimplementedTraceServiceServer
}

func (discardTraces) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// counted counts the spans exp is handed.
type counted struct {
	sdktrace.SpanExporter
	n *atomic.Int64
}

func (c counted) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.n.Add(int64(len(spans)))
	return c.SpanExporter.ExportSpans(ctx, spans)
}

// discardCodec reads nothing of a request; it writes responses as
// protobuf.
type discardCodec struct{}

func (discardCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (discardCodec) Unmarshal([]byte, any) error   { return nil }
func (discardCodec) Name() string                  { return "proto" }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ratioEnv is an environment with OTEL_TRACES_SAMPLER=traceidratio and
// its argument arg.
func ratioEnv(arg string) func(string) string {
	return func(k string) string {
		switch k {
		case "OTEL_TRACES_SAMPLER":
			return "traceidratio"
		case "OTEL_TRACES_SAMPLER_ARG":
			return arg
		}
		return ""
	}
}
