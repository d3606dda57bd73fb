package tracing

import (
	"context"
	"errors"
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
	lossy    prometheus.Counter
	lost     func() uint64
	log      *zap.Logger

	passed atomic.Uint64 // the position below which the spans are exported
	mu     sync.Mutex    // one Pass at a time
	// failing: the last Pass gave up (mu); logged once until one succeeds.
	failing bool
	// seen: lost() at the last Pass (mu).
	seen uint64
	// running: the flush a Pass stopped waiting for, until it ends (mu).
	running chan error
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
	// Lost is the number of spans dropped or failed so far (Spans.Lost);
	// a flush after which it grew counts as Lossy, not Exported: spans
	// below the position may be among them. Optional (nil: none lost).
	Lost  func() uint64
	Lossy prometheus.Counter
	Log   *zap.Logger
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
	if cfg.Lost == nil {
		cfg.Lost = func() uint64 { return 0 }
	}
	return &Gate{flush: cfg.Flush, timeout: cfg.Timeout, exported: cfg.Exported, gaveUp: cfg.GaveUp, lossy: cfg.Lossy, lost: cfg.Lost, log: cfg.Log}
}

// Reset sets the gate to start, the position the slot had confirmed when
// an attempt began: nothing below it is sent again.
func (g *Gate) Reset(start pglogrepl.LSN) { g.passed.Store(uint64(start)) }

// Passed is the position below which every span is exported, or given up
// on after Timeout, or lost (Lossy).
func (g *Gate) Passed() pglogrepl.LSN { return pglogrepl.LSN(g.passed.Load()) }

// Pass exports the spans ended so far, then lets acked through: acked was
// read (from the tracker) before the call, so every event below it has its
// span ended. A flush that fails or takes longer than the timeout is
// counted and logged, and acked passes anyway; a slow one goes on in the
// background, not cancelled (a cancelled export drops its batch), and the
// next Pass waits for it rather than starting another. A Pass whose ctx
// ends first lets nothing through. It never lowers Passed.
func (g *Gate) Pass(ctx context.Context, acked pglogrepl.LSN) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if acked <= g.Passed() || ctx.Err() != nil {
		return
	}
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	var err error
	for {
		// N.B. a flush an earlier Pass stopped waiting for covers only the
		// spans ended before it began: wait for it, then flush again.
		mine := g.running == nil
		if mine {
			done := make(chan error, 1)
			// N.B. not the caller's deadline: the batch processor bounds
			// an export by OTEL_BSP_EXPORT_TIMEOUT, and this by flushLimit.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushLimit)
			go func() {
				defer cancel()
				done <- g.flush(fctx)
			}()
			g.running = done
		}
		select {
		case err = <-g.running:
			g.running = nil
			if !mine {
				continue
			}
		case <-timer.C:
			err = errFlushSlow
		case <-ctx.Done():
			// N.B. the attempt ends: what it acknowledged is confirmed by
			// the next one or sent again; nothing passes.
			return
		}
		break
	}
	// N.B. read after the flush: a span of an event below acked was
	// dropped before it (when it ended) or failed in it.
	lost := g.lost()
	grew := lost > g.seen
	g.seen = lost
	if err == nil && grew {
		g.lossy.Inc()
	} else if err == nil {
		g.exported.Inc()
		if g.failing {
			g.log.Info("tracing: spans exported again before confirmation")
			g.failing = false
		}
	} else {
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

// flushLimit bounds a flush that Pass stopped waiting for.
const flushLimit = time.Minute

// errFlushSlow is a flush still running after the timeout.
var errFlushSlow = errors.New("span export still running")

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
