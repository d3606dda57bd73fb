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
// and the position passes anyway; the slow flush is not cancelled, and
// the next Pass waits for it before flushing again; a Pass whose context
// has ended lets nothing through.
func TestGateGivesUp(t *testing.T) {
	exported, gaveUp := gateCounters()
	var g *Gate
	type call struct {
		passed pglogrepl.LSN
		ctx    context.Context
	}
	calls := make(chan call, 10)
	block := make(chan struct{})
	flush := func(ctx context.Context) error { return errors.New("collector down") }
	g = NewGate(GateConfig{Exported: exported, GaveUp: gaveUp, Timeout: 10 * time.Millisecond,
		Flush: func(ctx context.Context) error {
			calls <- call{g.Passed(), ctx}
			return flush(ctx)
		}})
	g.Pass(context.Background(), 10)
	if g.Passed() != 10 || testutil.ToFloat64(gaveUp) != 1 {
		t.Fatalf("after a failed flush: passed %s, gave up %v; want 0/A, 1", g.Passed(), testutil.ToFloat64(gaveUp))
	}
	if c := <-calls; c.passed != 0 {
		t.Fatalf("the first flush ran with the gate at %s, want 0/0 (before passing)", c.passed)
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
	slow := <-calls
	if slow.passed != 10 || slow.ctx.Err() != nil {
		t.Fatalf("the slow flush ran with the gate at %s, its context %v; want 0/A and not cancelled", slow.passed, slow.ctx.Err())
	}
	// Still running: the next Pass waits for it and starts none.
	g.Pass(context.Background(), 30)
	if g.Passed() != 30 || testutil.ToFloat64(gaveUp) != 3 || len(calls) != 0 {
		t.Fatalf("a Pass while the slow flush runs: passed %s, gave up %v, %d flushes started; want 0/1E, 3, 0", g.Passed(), testutil.ToFloat64(gaveUp), len(calls))
	}
	// It ends: the next Pass flushes again, for the spans ended since.
	close(block)
	g.Pass(context.Background(), 40)
	if c := <-calls; c.passed != 30 || g.Passed() != 40 || testutil.ToFloat64(exported) != 1 {
		t.Fatalf("after the slow flush ended: a flush with the gate at %s, passed %s, exported %v; want 0/1E, 0/28, 1", c.passed, g.Passed(), testutil.ToFloat64(exported))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Pass(ctx, 50)
	if g.Passed() != 40 || len(calls) != 0 {
		t.Fatalf("after a cancelled Pass: passed %s, %d flushes started; want 0/28, 0", g.Passed(), len(calls))
	}
}
