package tracing

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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
	for _, bc := range []struct {
		name      string
		exporting bool
		otlp      bool
		contexts  [][]byte
		// ratio0: the sampler is traceidratio 0 (not parent-based): a
		// span is started for every event, and none is sampled.
		ratio0 bool
	}{
		{"not-exporting", false, false, all, false},
		{"exporting-unsampled-parent", true, false, none, false},
		{"exporting-unsampled-ratio0", true, false, all, true},
		{"exporting-100pct", true, false, all, false},
		{"exporting-10pct", true, false, contexts, false},
		{"otlp-http-100pct", true, true, all, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			valid, malformed := counters()
			cfg := RelayConfig{Valid: valid, Malformed: malformed}
			if bc.exporting {
				// N.B. a provider per run: one shut down would start spans
				// that record nothing.
				var exp sdktrace.SpanExporter = tracetest.NewNoopExporter()
				var opts []sdktrace.BatchSpanProcessorOption
				if bc.otlp {
					var err error
					// N.B. the OTLP/HTTP exporter's client under walrelay's
					// encoding, as NewProvider builds it.
					if exp, err = newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(sink.URL), otlptracehttp.WithInsecure())); err != nil {
						b.Fatal(err)
					}
					// N.B. walrelay's batch processor defaults, as NewProvider sets them.
					opts = batchDefaults(func(string) string { return "" })
				}
				popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp, opts...)}
				if bc.ratio0 {
					popts = append(popts, sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0)))
				}
				tp := sdktrace.NewTracerProvider(popts...)
				defer tp.Shutdown(context.Background())
				cfg.Provider, cfg.ParentBased = tp, !bc.ratio0
				if bc.ratio0 {
					cfg.Drops = Drops(ratioEnv("0"))
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
			// busy machine says little.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

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
