package tracing

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
)

// Spans counts what becomes of every sampled span walrelay ends: exported,
// dropped (the batch span processor's queue was full) or failed (the
// exporter's request failed after its retries). The SDK's batch processor
// drops a span whose queue is full without a trace; walrelay decides the
// drop itself, in front of it (processor), by the same rule, so that it
// counts and logs each one, and the processor behind never drops. At
// every moment exported + dropped + failed + waiting = ended.
type Spans struct {
	Exported, Dropped, Failed prometheus.Counter // required
	Log                       *zap.Logger

	// limit: the spans that may wait (queued, batched or being
	// exported) before one more is dropped; set by NewProvider.
	limit, queue int64
	waiting      atomic.Int64
	// lost: dropped + failed so far, for the Gate.
	lost atomic.Uint64
	// logged: when the last drop or failure was logged (unix ns);
	// unlogged: the spans lost since.
	logged   atomic.Int64
	unlogged atomic.Uint64
}

// logEvery is the least time between two warnings about lost spans.
const logEvery = 10 * time.Second

// flushSlack is room in the SDK processor's queue for the markers its
// ForceFlush queues (the Gate's, one at a time, and Shutdown's), so that
// a span s admitted never finds the queue full.
const flushSlack = 8

// Lost is the number of spans dropped or failed so far.
func (s *Spans) Lost() uint64 { return s.lost.Load() }

// queueSizes are the queue and export batch sizes of the batch span
// processor as the SDK reads them from OTEL_BSP_* (and caps the batch at
// the queue), with walrelay's defaults where a variable is unset
// (batchDefaults).
func queueSizes(getenv func(string) string) (queue, batch int) {
	queue, batch = bspQueue, bspBatch
	if v := strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE")); v != "" {
		queue, batch = positive(v, sdktrace.DefaultMaxQueueSize), sdktrace.DefaultMaxExportBatchSize
	}
	if v := strings.TrimSpace(getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")); v != "" {
		batch = positive(v, sdktrace.DefaultMaxExportBatchSize)
	}
	if batch > queue {
		batch = min(sdktrace.DefaultMaxExportBatchSize, queue)
	}
	return queue, batch
}

// positive is v as a positive integer, else def (the SDK's reading).
func positive(v string, def int) int {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return n
	}
	return def
}

// batcher is the batch span processor over exp that s counts: at most
// queue + batch spans wait (the SDK's processor holds a full queue and
// the batch it exports), the processor's own queue holds them all and
// the ForceFlush markers it queues besides (flushSlack).
func (s *Spans) batcher(exp sdktrace.SpanExporter, getenv func(string) string) sdktrace.SpanProcessor {
	queue, batch := queueSizes(getenv)
	s.limit, s.queue = int64(queue+batch), int64(queue)
	opts := append(batchDefaults(getenv), sdktrace.WithMaxQueueSize(queue+batch+flushSlack), sdktrace.WithMaxExportBatchSize(batch))
	return processor{sdktrace.NewBatchSpanProcessor(countingExporter{exp, s}, opts...), s}
}

// processor drops a sampled span when s.limit spans wait already.
type processor struct {
	sdktrace.SpanProcessor
	s *Spans
}

// OnEnd hands span on, or drops and counts it.
func (p processor) OnEnd(span sdktrace.ReadOnlySpan) {
	if !span.SpanContext().IsSampled() {
		return // N.B. the batch processor exports sampled spans only
	}
	if p.s.waiting.Add(1) > p.s.limit {
		p.s.waiting.Add(-1)
		p.s.Dropped.Inc()
		p.s.lose(1, "tracing: spans dropped: the batch span processor's queue was full while an export ran; raise OTEL_BSP_MAX_QUEUE_SIZE", nil)
		return
	}
	p.SpanProcessor.OnEnd(span)
}

// lose counts n spans lost and logs it, at most every logEvery.
func (s *Spans) lose(n int, msg string, err error) {
	s.lost.Add(uint64(n))
	s.unlogged.Add(uint64(n))
	now := time.Now().UnixNano()
	last := s.logged.Load()
	if now-last < int64(logEvery) || !s.logged.CompareAndSwap(last, now) {
		return
	}
	if s.Log != nil {
		s.Log.Warn(msg, zap.Uint64("spans_lost_since_last_warning", s.unlogged.Swap(0)), zap.Int64("OTEL_BSP_MAX_QUEUE_SIZE", s.queue), zap.Error(err))
	}
}

// countingExporter counts the spans exp exported or failed to export.
type countingExporter struct {
	sdktrace.SpanExporter
	s *Spans
}

// ExportSpans exports spans and counts them: they no longer wait.
func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.s.waiting.Add(-int64(len(spans)))
	if err != nil {
		e.s.Failed.Add(float64(len(spans)))
		e.s.lose(len(spans), "tracing: spans not exported: the OTLP export failed", err)
		return err
	}
	e.s.Exported.Add(float64(len(spans)))
	return nil
}
