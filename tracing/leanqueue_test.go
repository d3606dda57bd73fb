package tracing

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/walrelay/walrelay/decode"
)

// heldReceiver is an OTLP/HTTP receiver that holds every request until
// release is closed, counts the spans it was sent, and refuses them (400)
// when fail is set.
type heldReceiver struct {
	release chan struct{}
	fail    bool
	mu      sync.Mutex
	got     int
}

func (h *heldReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	<-h.release
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	_ = proto.Unmarshal(body, &req)
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	h.mu.Lock()
	h.got += n
	h.mu.Unlock()
	if h.fail {
		http.Error(w, "no", http.StatusBadRequest)
	}
}

func (h *heldReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

// TestLeanSpansCounted: the lean path counts as the SDK's path does
// (TestSpansDroppedCounted): with a queue of 4 spans and an export that
// does not return, most of 100 ended spans are dropped; once the export
// returns and a flush ran, dropped is the spans ended less those the
// receiver got, exported or failed the rest, Lost the dropped and failed;
// a gate flush after the drops counts spans_lost, a later one without
// drops exported.
func TestLeanSpansCounted(t *testing.T) {
	getenv := env("OTEL_BSP_MAX_QUEUE_SIZE", "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	for _, fail := range []bool{false, true} {
		recv := &heldReceiver{release: make(chan struct{}), fail: fail}
		srv := httptest.NewServer(recv)
		exp, err := newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(srv.URL), otlptracehttp.WithInsecure(),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})))
		if err != nil {
			t.Fatal(err)
		}
		s := newSpans()
		prov := newProviderFrom(exp, providerParts{res: resource.Empty(), sampler: samplerFromEnv(env()), ids: randomIDs{}}, s, getenv)
		valid, malformed := counters()
		rl := NewRelay(RelayConfig{Provider: prov, Valid: valid, Malformed: malformed, ParentBased: true})
		end := func(i int) {
			ev := &decode.Event{ID: []byte("e"), TraceContext: fmt.Appendf(nil, "00-0af7651916cd43dd8448eb211c80319c-%016x-01", i+1)}
			r := &kgo.Record{Topic: "t", Context: context.Background()}
			rl.Record(testTx(), ev, r, nil)
			rl.Acked(r, nil)
		}
		const ended = 100
		for i := range ended {
			end(i)
		}
		close(recv.release)
		// N.B. the failed exports may all have run before the flush.
		if err := prov.ForceFlush(context.Background()); err != nil && !fail {
			t.Fatal(err)
		}
		got := recv.count()
		checkCounted(t, s, fail, got, ended)
		dropped := testutil.ToFloat64(s.Dropped)
		gExported, gGaveUp := gateCounters()
		lossy := prometheus.NewCounter(prometheus.CounterOpts{Name: "l"})
		g := NewGate(GateConfig{Flush: prov.ForceFlush, Exported: gExported, GaveUp: gGaveUp, Lost: s.Lost, Lossy: lossy})
		g.Pass(context.Background(), 10)
		if !fail {
			if testutil.ToFloat64(lossy) != 1 || testutil.ToFloat64(gExported) != 0 {
				t.Errorf("a flush after %v drops counted %v exported, %v spans_lost; want 0, 1", dropped, testutil.ToFloat64(gExported), testutil.ToFloat64(lossy))
			}
			end(ended)
			g.Pass(context.Background(), 20)
			if testutil.ToFloat64(lossy) != 1 || testutil.ToFloat64(gExported) != 1 || recv.count() != got+1 {
				t.Errorf("a flush without drops: %v exported, %v spans_lost, %d spans received; want 1, 1, %d", testutil.ToFloat64(gExported), testutil.ToFloat64(lossy), recv.count(), got+1)
			}
		}
		if err := prov.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		srv.Close()
	}
}

// TestLeanScheduleDelay: a batch that is not full goes after
// OTEL_BSP_SCHEDULE_DELAY, without a flush; a span ended after Shutdown
// is dropped, counted.
func TestLeanScheduleDelay(t *testing.T) {
	recv := &heldReceiver{release: make(chan struct{})}
	close(recv.release)
	srv := httptest.NewServer(recv)
	defer srv.Close()
	exp, err := newExporter(context.Background(), otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(srv.URL), otlptracehttp.WithInsecure()))
	if err != nil {
		t.Fatal(err)
	}
	s := newSpans()
	prov := newProviderFrom(exp, providerParts{res: resource.Empty(), sampler: samplerFromEnv(env()), ids: randomIDs{}}, s, env("OTEL_BSP_SCHEDULE_DELAY", "20"))
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Provider: prov, Valid: valid, Malformed: malformed, ParentBased: true})
	end := func() {
		ev := &decode.Event{ID: []byte("e"), TraceContext: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}
		r := &kgo.Record{Topic: "t", Context: context.Background()}
		rl.Record(testTx(), ev, r, nil)
		rl.Acked(r, nil)
	}
	for range 3 {
		end()
	}
	// N.B. both conditions: the receiver counts a request before it
	// answers, the exporter counts the spans exported once it has the
	// answer (waiting for the first alone failed 88 times in 500).
	deadline := time.Now().Add(10 * time.Second)
	for (recv.count() < 3 || testutil.ToFloat64(s.Exported) < 3) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // N.B. polling for the condition
	}
	if n := recv.count(); n != 3 || testutil.ToFloat64(s.Exported) != 3 {
		t.Fatalf("after the schedule delay the receiver got %d spans, exported %v; want 3", n, testutil.ToFloat64(s.Exported))
	}
	if err := prov.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	end()
	if testutil.ToFloat64(s.Dropped) != 1 || s.Lost() != 1 {
		t.Errorf("a span ended after Shutdown: dropped %v lost %d, want 1 1", testutil.ToFloat64(s.Dropped), s.Lost())
	}
}
