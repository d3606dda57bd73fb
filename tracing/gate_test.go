package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/walrelay/walrelay/decode"
)

func gateCounters() (exported, gaveUp prometheus.Counter) {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "e"}), prometheus.NewCounter(prometheus.CounterOpts{Name: "g"})
}

// TestGateExportsBeforePassing: the spans Relay ended are in the exporter
// once Pass returns, though the batch processor would hold them an hour;
// only then is the position passed.
func TestGateExportsBeforePassing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	prov := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	defer prov.Shutdown(context.Background())
	valid, malformed := counters()
	rl := NewRelay(RelayConfig{Provider: prov, Valid: valid, Malformed: malformed, ParentBased: true})
	for i := range 10 {
		r := &kgo.Record{Topic: "outbox.event.order", Offset: int64(i), Context: context.Background()}
		rl.Record(testTx(), &decode.Event{ID: []byte("e"), TraceContext: []byte(tp)}, r, nil)
		rl.Acked(r, nil)
	}
	var atFlush pglogrepl.LSN
	exported, gaveUp := gateCounters()
	g := NewGate(GateConfig{Exported: exported, GaveUp: gaveUp, Flush: func(ctx context.Context) error {
		atFlush = 1 // set: the flush ran
		return prov.ForceFlush(ctx)
	}})
	g.Reset(100)
	if got := len(exp.GetSpans()); got != 0 {
		t.Fatalf("%d spans exported before Pass, want 0 (the batch processor's delay is an hour)", got)
	}
	g.Pass(context.Background(), 200)
	if got := len(exp.GetSpans()); got != 10 || atFlush == 0 {
		t.Fatalf("%d spans exported by Pass (flush ran: %v), want 10", got, atFlush != 0)
	}
	if g.Passed() != 200 || testutil.ToFloat64(exported) != 1 || testutil.ToFloat64(gaveUp) != 0 {
		t.Fatalf("passed %s, exported %v, gave up %v; want 0/C8, 1, 0", g.Passed(), testutil.ToFloat64(exported), testutil.ToFloat64(gaveUp))
	}
	// Nothing new acknowledged: no flush.
	atFlush = 0
	g.Pass(context.Background(), 150)
	if atFlush != 0 || g.Passed() != 200 {
		t.Fatalf("Pass below the gate flushed (%v) or lowered it to %s", atFlush != 0, g.Passed())
	}
}

// TestGateGivesUp: a flush that fails or outlasts the timeout is counted
// and the position passes anyway; one ended by the caller's context does
// not pass.
func TestGateGivesUp(t *testing.T) {
	exported, gaveUp := gateCounters()
	var flushPassed []pglogrepl.LSN
	var g *Gate
	block := make(chan struct{})
	defer close(block)
	flush := func(ctx context.Context) error { return errors.New("collector down") }
	g = NewGate(GateConfig{Exported: exported, GaveUp: gaveUp, Timeout: 10 * time.Millisecond,
		Flush: func(ctx context.Context) error {
			flushPassed = append(flushPassed, g.Passed())
			return flush(ctx)
		}})
	g.Pass(context.Background(), 10)
	if g.Passed() != 10 || testutil.ToFloat64(gaveUp) != 1 {
		t.Fatalf("after a failed flush: passed %s, gave up %v; want 0/A, 1", g.Passed(), testutil.ToFloat64(gaveUp))
	}
	flush = func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-block:
			return nil
		}
	}
	g.Pass(context.Background(), 20)
	if g.Passed() != 20 || testutil.ToFloat64(gaveUp) != 2 {
		t.Fatalf("after a flush past the timeout: passed %s, gave up %v; want 0/14, 2", g.Passed(), testutil.ToFloat64(gaveUp))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Pass(ctx, 30)
	if g.Passed() != 20 || testutil.ToFloat64(gaveUp) != 2 {
		t.Fatalf("after a cancelled Pass: passed %s, gave up %v; want 0/14, 2", g.Passed(), testutil.ToFloat64(gaveUp))
	}
	// N.B. each flush ran before its position passed.
	if len(flushPassed) != 3 || flushPassed[0] != 0 || flushPassed[1] != 10 || flushPassed[2] != 20 {
		t.Fatalf("the gate during the flushes: %v, want [0/0 0/A 0/14]", flushPassed)
	}
}
