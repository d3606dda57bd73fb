package pipeline

import (
	"context"
	"math"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/tracing"
)

// relayTracing is the relay's side of package tracing: the sink's Tracer
// and the provider whose spans Run flushes as it ends.
type relayTracing struct {
	tracer   sink.Tracer // nil: --trace-context-column -
	shutdown func(context.Context) error
	// gate holds each confirmation until the spans below it are
	// exported; nil when no spans are exported.
	gate *tracing.Gate
}

// newTracing builds the relay's tracing from its trace-context column and
// the OTEL_* environment: spans are exported only when the environment
// configures an OTLP endpoint (tracing.Enabled); otherwise the writers'
// contexts are copied into the headers unchanged. An OTEL_* setting
// walrelay cannot honour is a configuration error.
func newTracing(cfg Config, m *metrics.Metrics, log *zap.Logger) (relayTracing, error) {
	if cfg.Decode.TraceContextColumn == "-" {
		return relayTracing{}, nil
	}
	rc := relayConfig(cfg, m)
	rt := relayTracing{}
	if tracing.Enabled(os.Getenv) {
		spans := &tracing.Spans{Exported: m.TraceSpans.WithLabelValues(metrics.TraceSpanExported), Dropped: m.TraceSpans.WithLabelValues(metrics.TraceSpanDropped),
			Failed: m.TraceSpans.WithLabelValues(metrics.TraceSpanFailed), Log: log.Named("tracing")}
		tp, err := tracing.NewProvider(context.Background(), os.Getenv, cfg.Marker.Version, spans)
		if err != nil {
			return rt, err
		}
		rc.Provider, rt.shutdown, rc.ParentBased, rc.Drops = tp, tp.Shutdown, tracing.ParentBased(os.Getenv), tracing.Drops(os.Getenv)
		rt.gate = tracing.NewGate(tracing.GateConfig{Flush: tp.ForceFlush, Log: log.Named("tracing"),
			Exported: m.TraceFlushes.WithLabelValues(metrics.TraceFlushExported),
			GaveUp:   m.TraceFlushes.WithLabelValues(metrics.TraceFlushGaveUp),
			Lost:     spans.Lost, Lossy: m.TraceFlushes.WithLabelValues(metrics.TraceFlushLossy)})
		log.Info("tracing: exporting spans over OTLP (OTEL_* environment)")
	} else if err := tracing.CheckEnv(os.Getenv); err != nil {
		return rt, err
	}
	rt.tracer = tracing.NewRelay(rc)
	return rt, nil
}

// relayConfig is the span and header settings of cfg: the trace-context
// counters and the database the slot streams from (db.namespace).
func relayConfig(cfg Config, m *metrics.Metrics) tracing.RelayConfig {
	return tracing.RelayConfig{
		Valid:     m.TraceContexts.WithLabelValues(metrics.TraceContextValid),
		Malformed: m.TraceContexts.WithLabelValues(metrics.TraceContextMalformed),
		Database:  cfg.Replication.Database(),
	}
}

// flush exports the spans still buffered, within the shutdown timeout.
func (t relayTracing) flush(log *zap.Logger, timeout time.Duration) {
	if t.shutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		log.Warn("tracing: spans not exported at shutdown", zap.Error(err))
	}
}

// confirmer is c, the attempt's confirmer (the slot at start), as the
// stream sees it: when spans are exported, no position is confirmed before
// the spans of the events below it are (tracing.Gate); else c itself, at
// no cost.
func (t relayTracing) confirmer(c replication.Confirmer, start pglogrepl.LSN) replication.Confirmer {
	if t.gate == nil {
		return c
	}
	t.gate.Reset(start)
	return spanConfirmer{c, t.gate}
}

// exportSpans passes the gate, every replication.ConfirmGap, up to what
// the attempt's confirmer c would confirm, until ctx ends or done closes.
func (t relayTracing) exportSpans(ctx context.Context, done <-chan struct{}, c replication.Confirmer) error {
	if t.gate == nil {
		return nil
	}
	return t.gate.Run(ctx, done, c.Watermark, replication.ConfirmGap)
}

// exported passes the gate up to c's watermark at once: a graceful stop's
// final status update confirms all that Kafka acknowledged.
func (t relayTracing) exported(ctx context.Context, c replication.Confirmer) {
	if t.gate != nil {
		t.gate.Pass(ctx, c.Watermark())
	}
}

// spanConfirmer bounds a confirmer by the span gate.
type spanConfirmer struct {
	replication.Confirmer
	gate *tracing.Gate
}

// Watermark is the confirmer's, but no further than the exported spans.
func (c spanConfirmer) Watermark() pglogrepl.LSN {
	return min(c.Confirmer.Watermark(), c.gate.Passed())
}

// Bound is the confirmer's bound and, while spans below the watermark wait
// for export, the gate: a keepalive's WAL end is confirmed past the
// watermark only once every acknowledged event's span is exported.
func (c spanConfirmer) Bound() pglogrepl.LSN {
	b := pglogrepl.LSN(math.MaxUint64)
	if bd, ok := c.Confirmer.(replication.Bounder); ok {
		b = bd.Bound()
	}
	// N.B. the gate read first: passed at or past the watermark read
	// after it, every span of an acknowledged event is exported.
	if p := c.gate.Passed(); p < c.Confirmer.Watermark() {
		b = min(b, p)
	}
	return b
}
