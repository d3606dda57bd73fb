package tracing

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// heldExporter holds every export until release is closed, and counts
// the spans it was handed; it fails them when fail is set.
type heldExporter struct {
	release chan struct{}
	fail    bool
	mu      sync.Mutex
	got     int
}

func (e *heldExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	<-e.release
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got += len(spans)
	if e.fail {
		return errors.New("collector down")
	}
	return nil
}

func (e *heldExporter) Shutdown(context.Context) error { return nil }

func (e *heldExporter) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got
}

func newSpans() *Spans {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}) }
	return &Spans{Exported: c(), Dropped: c(), Failed: c()}
}

// TestSpansDroppedCounted: with a queue of 4 spans (OTEL_BSP_MAX_QUEUE_SIZE)
// and an export that does not return, most of 100 ended spans cannot be
// queued; once the export returns and a flush ran, the dropped counter is
// the spans ended less those the exporter received, and a gate flush
// after the drops is counted as spans_lost, not exported.
func TestSpansDroppedCounted(t *testing.T) {
	getenv := env("OTEL_BSP_MAX_QUEUE_SIZE", "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	for _, fail := range []bool{false, true} {
		exp := &heldExporter{release: make(chan struct{}), fail: fail}
		s := newSpans()
		prov := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.batcher(exp, getenv)))
		tr := prov.Tracer("t")
		const ended = 100
		for range ended {
			_, sp := tr.Start(context.Background(), "db-log-write")
			sp.End()
		}
		close(exp.release)
		if err := prov.ForceFlush(context.Background()); err != nil && !fail {
			t.Fatal(err)
		}
		got := exp.count()
		checkCounted(t, s, fail, got, ended)
		dropped := testutil.ToFloat64(s.Dropped)

		gExported, gGaveUp := gateCounters()
		lossy := prometheus.NewCounter(prometheus.CounterOpts{Name: "l"})
		g := NewGate(GateConfig{Flush: prov.ForceFlush, Exported: gExported, GaveUp: gGaveUp, Lost: s.Lost, Lossy: lossy})
		g.Pass(context.Background(), 10)
		if fail {
			// N.B. failed exports are failed flushes: gave up.
			_ = prov.Shutdown(context.Background())
			continue
		}
		if testutil.ToFloat64(lossy) != 1 || testutil.ToFloat64(gExported) != 0 {
			t.Errorf("a flush after %v drops counted %v exported, %v spans_lost; want 0, 1", dropped, testutil.ToFloat64(gExported), testutil.ToFloat64(lossy))
		}
		// Nothing lost since: exported.
		_, sp := tr.Start(context.Background(), "db-log-write")
		sp.End()
		g.Pass(context.Background(), 20)
		if testutil.ToFloat64(lossy) != 1 || testutil.ToFloat64(gExported) != 1 || exp.count() != got+1 {
			t.Errorf("a flush without drops: %v exported, %v spans_lost, %d spans received; want 1, 1, %d", testutil.ToFloat64(gExported), testutil.ToFloat64(lossy), exp.count(), got+1)
		}
		_ = prov.Shutdown(context.Background())
	}
}

// TestQueueSizes: the SDK's reading of OTEL_BSP_MAX_QUEUE_SIZE and
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, walrelay's defaults where unset.
func TestQueueSizes(t *testing.T) {
	for _, tc := range []struct {
		getenv       func(string) string
		queue, batch int
	}{
		{env(), 32768, 2048},
		{env("OTEL_BSP_MAX_QUEUE_SIZE", "100"), 100, 100},
		{env("OTEL_BSP_MAX_QUEUE_SIZE", "10000"), 10000, 512},
		{env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64"), 32768, 64},
		{env("OTEL_BSP_MAX_QUEUE_SIZE", "x"), 2048, 512},
	} {
		if q, b := queueSizes(tc.getenv); q != tc.queue || b != tc.batch {
			t.Errorf("queue %d batch %d, want %d %d", q, b, tc.queue, tc.batch)
		}
	}
}

// checkCounted checks s's counters after ended spans of which the
// receiving end got got (the rest dropped), every export failing when
// fail: some but not all got through, each dropped one counted, the rest
// counted exported or failed, and Lost every span not exported.
func checkCounted(t *testing.T, s *Spans, fail bool, got, ended int) {
	t.Helper()
	dropped, exported, failed := testutil.ToFloat64(s.Dropped), testutil.ToFloat64(s.Exported), testutil.ToFloat64(s.Failed)
	if got == 0 || got == ended || dropped != float64(ended-got) {
		t.Errorf("fail %v: the receiving end got %d of %d spans; dropped counter %v, want %d", fail, got, ended, dropped, ended-got)
	}
	want := [2]float64{float64(got), 0} // exported, failed
	if fail {
		want = [2]float64{0, float64(got)}
	}
	if exported != want[0] || failed != want[1] || s.Lost() != uint64(ended-int(want[0])) {
		t.Errorf("fail %v: exported %v failed %v lost %d, want %v %v %d", fail, exported, failed, s.Lost(), want[0], want[1], ended-int(want[0]))
	}
}
