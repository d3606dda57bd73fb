package pipeline

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/tracing"
)

// relayTracing is the relay's side of package tracing: the sink's Tracer
// and the provider whose spans Run flushes as it ends.
type relayTracing struct {
	tracer   sink.Tracer // nil: --trace-context-column -
	shutdown func(context.Context) error
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
	rc := tracing.RelayConfig{
		Valid:     m.TraceContexts.WithLabelValues(metrics.TraceContextValid),
		Malformed: m.TraceContexts.WithLabelValues(metrics.TraceContextMalformed),
	}
	rt := relayTracing{}
	if tracing.Enabled(os.Getenv) {
		tp, err := tracing.NewProvider(context.Background(), os.Getenv, cfg.Marker.Version)
		if err != nil {
			return rt, err
		}
		rc.Provider, rt.shutdown, rc.ParentBased = tp, tp.Shutdown, tracing.ParentBased(os.Getenv)
		log.Info("tracing: exporting spans over OTLP (OTEL_* environment)")
	} else if err := tracing.CheckEnv(os.Getenv); err != nil {
		return rt, err
	}
	rt.tracer = tracing.NewRelay(rc)
	return rt, nil
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
