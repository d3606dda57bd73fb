package tracing

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/decode"
)

// TestDropsAsTheSDK: for a sampler that does not follow the parent, the
// relay decides before starting a span what the SDK, configured from the
// same environment, decides when it starts one; a dropped event's record
// gets the SDK's kind of traceparent (the writer's trace, a span id of its
// own, not sampled) and no span is exported.
func TestDropsAsTheSDK(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
		{"OTEL_TRACES_SAMPLER": "traceidratio"},
		{"OTEL_TRACES_SAMPLER": "always_off"},
	} {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			getenv := func(k string) string { return env[k] }
			exp := tracetest.NewInMemoryExporter()
			// N.B. no WithSampler: the SDK reads the environment, as NewProvider.
			prov := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer prov.Shutdown(context.Background())
			valid, malformed := counters()
			rl := NewRelay(RelayConfig{Provider: prov, Valid: valid, Malformed: malformed, Drops: Drops(getenv)})
			if Drops(getenv) == nil {
				t.Fatal("Drops is nil")
			}
			sdk := prov.Tracer("t")
			dropped := 0
			for i := range 200 {
				tid := fmt.Sprintf("%016x%016x", i*7919+1, uint64(i)*0x9e3779b97f4a7c15)
				tp := "00-" + tid + "-" + spanID + "-01"
				sc, _ := spanContext([]byte(tp), nil)
				_, want := sdk.Start(trace.ContextWithRemoteSpanContext(context.Background(), sc), "x")
				r := &kgo.Record{Context: context.Background()}
				n := len(exp.GetSpans())
				hdrs := rl.Record(testTx(), &decode.Event{ID: []byte("e"), TraceContext: []byte(tp)}, r, nil)
				rl.Acked(r, nil)
				got, _ := header(hdrs, HeaderTraceparent)
				if want.IsRecording() {
					if len(exp.GetSpans()) != n+1 || got[53:] != "01" {
						t.Fatalf("trace %s: the SDK samples it, the relay exported %d spans, header %s", tid, len(exp.GetSpans())-n, got)
					}
					continue
				}
				dropped++
				if len(exp.GetSpans()) != n || len(got) != 55 || got[:36] != tp[:36] || got[36:52] == spanID || got[52:] != "-00" || !ValidTraceparent([]byte(got)) {
					t.Fatalf("trace %s: the SDK drops it; the relay exported %d spans, header %q", tid, len(exp.GetSpans())-n, got)
				}
			}
			t.Logf("%d of 200 dropped", dropped)
		})
	}
	for _, s := range []string{"", "parentbased_traceidratio", "always_on", "parentbased_always_off"} {
		if Drops(func(k string) string {
			if k == "OTEL_TRACES_SAMPLER" {
				return s
			}
			return ""
		}) != nil {
			t.Errorf("OTEL_TRACES_SAMPLER=%q: Drops is set, want nil (the parent or nothing decides)", s)
		}
	}
}
