package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// leanExporter is the lean path's batch span processor and exporter in
// one: ended spans (leanSpan) wait in a bounded queue and one goroutine
// sends them in batches, encoded straight to OTLP, through the OTLP client
// the SDK's exporter uses. It keeps the batch span processor's rules under
// the same OTEL_BSP_* settings (queueSizes, batchDefaults): a batch goes
// when it is full or the schedule delay has passed since the last export,
// an export is bounded by OTEL_BSP_EXPORT_TIMEOUT, and a span ended while
// queue + batch spans wait is dropped. It counts in Spans exactly as the
// SDK's path does (exported, dropped, failed, and the Gate's Lost).
type leanExporter struct {
	client otlptrace.Client
	enc    *leanEncoding
	spans  *Spans
	// limit: the spans that may wait (queued or being exported) before
	// one more is dropped: the queue and the batch being exported, as
	// Spans.batcher counts them for the SDK's processor.
	limit          int64
	batch          int
	delay, timeout time.Duration

	mu      sync.Mutex
	pending []*leanSpan // ended, not yet taken for export (mu)
	waiting int64       // pending and being exported (mu)
	stopped bool        // shutdown was called (mu)

	full    chan struct{}   // a batch is pending (capacity 1)
	flushes chan chan error // ForceFlush: export what is pending, answer
	stop    chan struct{}   // Shutdown: export what is pending, end
	done    chan struct{}   // the goroutine ended

	// the goroutine's: the batch taken, and the request's bytes.
	out []*leanSpan
	buf []byte
}

// newLeanExporter starts the lean path's exporter over client (started),
// for spans of resource res.
func newLeanExporter(client otlptrace.Client, res *resource.Resource, spans *Spans, getenv func(string) string) *leanExporter {
	queue, batch := queueSizes(getenv)
	delay, timeout := bspDelay, time.Duration(sdktrace.DefaultExportTimeout)*time.Millisecond
	// N.B. read as the SDK reads them: milliseconds, any integer.
	if v := strings.TrimSpace(getenv("OTEL_BSP_SCHEDULE_DELAY")); v != "" {
		delay = time.Duration(anyInt(v, sdktrace.DefaultScheduleDelay)) * time.Millisecond
	}
	if v := strings.TrimSpace(getenv("OTEL_BSP_EXPORT_TIMEOUT")); v != "" {
		timeout = time.Duration(anyInt(v, sdktrace.DefaultExportTimeout)) * time.Millisecond
	}
	if spans.queue == 0 {
		spans.queue = int64(queue) // the warning's OTEL_BSP_MAX_QUEUE_SIZE
	}
	e := &leanExporter{client: client, enc: newLeanEncoding(res), spans: spans,
		limit: int64(queue + batch), batch: batch, delay: delay, timeout: timeout,
		pending: make([]*leanSpan, 0, batch), out: make([]*leanSpan, 0, batch),
		full: make(chan struct{}, 1), flushes: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	go e.run()
	return e
}

// end queues ended span s, or drops and counts it when the queue is full.
func (e *leanExporter) end(s *leanSpan) {
	e.mu.Lock()
	if e.waiting >= e.limit || e.stopped {
		e.mu.Unlock()
		e.spans.Dropped.Inc()
		e.spans.lose(1, "tracing: spans dropped: the batch span processor's queue was full while an export ran; raise OTEL_BSP_MAX_QUEUE_SIZE", nil)
		return
	}
	e.waiting++
	e.pending = append(e.pending, s)
	full := len(e.pending) == e.batch
	e.mu.Unlock()
	if full {
		select {
		case e.full <- struct{}{}:
		default:
		}
	}
}

// run exports batches until stop: a full one at once, the others when the
// delay has passed since the last export; all that is pending on a flush
// and at the end.
func (e *leanExporter) run() {
	defer close(e.done)
	timer := time.NewTimer(e.delay)
	defer timer.Stop()
	for {
		select {
		case <-e.full:
			e.export(true)
		case <-timer.C:
			e.export(false)
		case ch := <-e.flushes:
			ch <- e.export(false)
		case <-e.stop:
			e.export(false)
			return
		}
		// N.B. as the SDK's processor: the delay runs from an export.
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(e.delay)
	}
}

// export sends the pending spans in batches: only full batches when
// fullOnly, else all. It returns the first error.
func (e *leanExporter) export(fullOnly bool) error {
	var first error
	for {
		e.mu.Lock()
		n := min(len(e.pending), e.batch)
		if n == 0 || fullOnly && n < e.batch {
			e.mu.Unlock()
			return first
		}
		if n == len(e.pending) {
			e.out, e.pending = e.pending, e.out[:0]
		} else {
			e.out = append(e.out[:0], e.pending[:n]...)
			rest := copy(e.pending, e.pending[n:])
			clear(e.pending[rest:])
			e.pending = e.pending[:rest]
		}
		e.mu.Unlock()
		if err := e.send(e.out); err != nil && first == nil {
			first = err
		}
		clear(e.out) // N.B. the spans are garbage now
		e.out = e.out[:0]
	}
}

// send exports spans in one request and counts them.
func (e *leanExporter) send(spans []*leanSpan) error {
	e.buf = e.enc.appendBatch(e.buf[:0], spans)
	rs := &tracepb.ResourceSpans{}
	rs.ProtoReflect().SetUnknown(e.buf[:len(e.buf):len(e.buf)])
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if e.timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, e.timeout, errors.New("processor export timeout"))
	}
	err := e.client.UploadTraces(ctx, []*tracepb.ResourceSpans{rs})
	cancel()
	e.mu.Lock()
	e.waiting -= int64(len(spans))
	e.mu.Unlock()
	if err != nil {
		e.spans.Failed.Add(float64(len(spans)))
		e.spans.lose(len(spans), "tracing: spans not exported: the OTLP export failed", err)
		return fmt.Errorf("traces export: %w", err)
	}
	e.spans.Exported.Add(float64(len(spans)))
	return nil
}

// flush exports every span ended before the call; its error is the first
// export's that failed. When ctx ends first the export goes on.
func (e *leanExporter) flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch := make(chan error, 1)
	select {
	case e.flushes <- ch:
	case <-e.done:
		return nil // N.B. as the SDK's processor after Shutdown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown exports what is pending and stops the goroutine; spans ended
// after it are dropped (counted).
func (e *leanExporter) shutdown(ctx context.Context) error {
	e.mu.Lock()
	if !e.stopped {
		e.stopped = true
		close(e.stop)
	}
	e.mu.Unlock()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// anyInt is v as an integer, else def (the SDK's reading of OTEL_BSP_*
// durations).
func anyInt(v string, def int) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}
