package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// FlushTimeout is the longest Gate waits for the spans below a position to
// be exported before it lets the position be confirmed without them: a
// Collector that is down or slow delays confirmation by at most this, never
// stops it.
const FlushTimeout = time.Second

// Gate holds back the confirmation of a position until the spans of the
// events below it are exported: a confirmed event is never sent again, so a
// span still waiting in the batch span processor when the process dies
// (kill -9) would be lost for good. An event not yet confirmed is sent
// again after a crash, under a new span (walrelay.replayed).
//
// N.B. the sink ends an event's span (Relay.Acked) before it acknowledges
// the event to the tracker: a position read from the tracker before a
// flush has the spans of every event below it in the processor's queue,
// and ForceFlush exports all that is queued.
type Gate struct {
	flush    func(context.Context) error
	timeout  time.Duration
	exported prometheus.Counter
	gaveUp   prometheus.Counter
	log      *zap.Logger

	passed atomic.Uint64 // the position below which the spans are exported
	mu     sync.Mutex    // one Pass at a time
	// failing: the last Pass gave up (mu); logged once until one succeeds.
	failing bool
}

// GateConfig configures a Gate.
type GateConfig struct {
	// Flush exports the spans ended so far (the tracer provider's
	// ForceFlush). Required.
	Flush func(context.Context) error
	// Timeout bounds a flush; default FlushTimeout.
	Timeout time.Duration
	// Exported and GaveUp count the flushes that exported and those that
	// failed or timed out (the position passed regardless). Required.
	Exported, GaveUp prometheus.Counter
	Log              *zap.Logger
}

// NewGate returns a Gate at position 0; Reset moves it to where an
// attempt starts.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Timeout <= 0 {
		cfg.Timeout = FlushTimeout
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Gate{flush: cfg.Flush, timeout: cfg.Timeout, exported: cfg.Exported, gaveUp: cfg.GaveUp, log: cfg.Log}
}

// Reset sets the gate to start, the position the slot had confirmed when
// an attempt began: nothing below it is sent again.
func (g *Gate) Reset(start pglogrepl.LSN) { g.passed.Store(uint64(start)) }

// Passed is the position below which every span is exported, or given up
// on after Timeout.
func (g *Gate) Passed() pglogrepl.LSN { return pglogrepl.LSN(g.passed.Load()) }

// Pass exports the spans ended so far, then lets acked through: acked was
// read (from the tracker) before the call, so every event below it has its
// span ended. A flush that fails or takes longer than the timeout is
// counted and logged, and acked passes anyway. It never lowers Passed.
func (g *Gate) Pass(ctx context.Context, acked pglogrepl.LSN) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if acked <= g.Passed() {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, g.timeout)
	err := g.flush(fctx)
	cancel()
	switch {
	case err == nil:
		g.exported.Inc()
		if g.failing {
			g.log.Info("tracing: spans exported again before confirmation")
			g.failing = false
		}
	case ctx.Err() != nil:
		// N.B. the attempt ends: what it acknowledged is confirmed by the
		// next one's final status or sent again; nothing passes.
		return
	default:
		g.gaveUp.Inc()
		if !g.failing {
			g.log.Warn("tracing: spans not exported within the timeout; positions are confirmed without waiting for them (a crash now may lose their spans)",
				zap.Duration("timeout", g.timeout), zap.Stringer("lsn", acked), zap.Error(err))
			g.failing = true
		}
	}
	// N.B. monotonic: Reset alone moves it back, between attempts.
	if uint64(acked) > g.passed.Load() {
		g.passed.Store(uint64(acked))
	}
}

// Run passes acked() every interval, until ctx ends or done is closed.
func (g *Gate) Run(ctx context.Context, done <-chan struct{}, acked func() pglogrepl.LSN, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.Pass(ctx, acked())
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
