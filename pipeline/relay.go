package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/recovery"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// Config is what the relay runs: the stages' configurations and what the
// relay around them needs.
type Config struct {
	// Replication configures the replication stage; its StatusInterval
	// also paces the watch loop and the health check, its ShutdownTimeout
	// bounds a graceful stop. Its defaults are applied (WithDefaults).
	Replication replication.Config
	// Decode configures the decoder. ResolvePartitionRoots is always set: the
	// relay resolves partitions against the catalog.
	Decode decode.Config
	// Sink configures the Kafka producer; its collaborators (sink.Deps:
	// tracker, metrics, isolation, created topics) are the relay's.
	Sink sink.Config
	// LagWarnBytes: log a warning, at most once a minute, while the slot's
	// lag exceeds this many bytes. Default 0: never.
	LagWarnBytes int64
	// Marker says where the slot markers are kept (package kafkastate): its
	// Brokers and Opts default to the sink's.
	Marker kafkastate.Config
	// Metrics records the relay's metrics; the relay adds the gauges read
	// from the running attempt (Metrics.ReadFrom). Default: a registry of
	// its own, served by nobody.
	Metrics *metrics.Metrics
	// NullSink acknowledges every event at once without Kafka (sink.Deps's
	// Null): the bench build's --bench-null-sink. Never for production.
	NullSink bool
	// Recovery says whether the relay recovers a missing slot from the
	// outbox table and backfills a new one (recovery.go).
	Recovery recovery.Options
	// StandbyURL is a physical standby that synchronizes the slot
	// (PostgreSQL 17+; "": none): the relay makes its copy synchronizable
	// and reports it (keepSyncReady).
	StandbyURL string
	// Markers is a marker store shared with the process's other
	// pipelines (package fleet); nil: the relay opens its own.
	Markers *SharedMarkers
}

// Validate reports every problem with the stages' configurations at once.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []interface{ Validate() error }{c.Replication, c.Decode, c.Sink, c.Recovery} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.LagWarnBytes < 0 {
		errs = append(errs, fmt.Errorf("--lag-warn-bytes %d: want 0 (never) or more", c.LagWarnBytes))
	}
	if c.NullSink && c.Sink.ExactlyOnce {
		errs = append(errs, sink.ErrNullExactlyOnce)
	}
	return errors.Join(errs...)
}

// Relay runs attempts of the pipeline and restarts them after failures.
type Relay struct {
	rc           replication.Config
	dc           decode.Config
	sc           sink.Config
	mc           kafkastate.Config
	hist         history
	log          *zap.Logger
	metrics      *metrics.Metrics
	lagWarnBytes int64
	nullSink     bool
	recovery     recovery.Config
	standbyURL   string

	beat    atomic.Int64 // unix nanoseconds: the run loop's last turn
	current atomic.Pointer[attemptState]
	// kafkaAnswered is when Kafka last answered (unix nanoseconds: the
	// sink's start, then the watch loop's pings); 0 after a start failed.
	kafkaAnswered atomic.Int64
	// failure is the error of the last failed attempt, for /readyz while
	// the relay restarts.
	failure atomic.Pointer[string]
	// waitingFor is what the last wait for the slot waits for (waitFor's
	// message), for /readyz while it waits.
	waitingFor atomic.Pointer[string]
	// held says whether PostgreSQL holds the stream back for
	// synchronized_standby_slots (heldback.go).
	held heldBack
	// failoverReady is what keepSyncReady last saw of the standby's copy
	// (0 not yet read, 1 ready, 2 not ready), kept across attempts.
	failoverReady atomic.Int32

	abort     chan struct{}
	abortOnce sync.Once
	// stopBy: unix nanoseconds, the end of the shutdown timeout once
	// stopping (closing.go); 0 before.
	stopBy atomic.Int64

	// iso outlives the attempts: after Kafka rejected a record batch, the
	// next attempts produce its topic's records one at a time until the
	// record at fault is found (sink.Isolation).
	iso *sink.Isolation
	// topics outlives the attempts: --max-created-topics counts the topics
	// created since walrelay started, not since the last restart.
	topics *sink.CreatedTopics
	// commits outlives the attempts: the marker's commit time (committime.go).
	commits commitTimes
	tracing relayTracing
}

// attemptState is the live state of one attempt, read by the health
// checks and the metrics.
type attemptState struct {
	stream *replication.Stream
	tr     *checkpoint.Tracker
	snk    *sink.Sink
}

// New returns a relay for cfg; Run starts it.
func New(cfg Config, log *zap.Logger) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := cfg.Metrics
	if m == nil {
		m = metrics.New()
	}
	mc := cfg.Marker
	if len(mc.Brokers) == 0 {
		mc.Brokers, mc.Kafka = cfg.Sink.Brokers, cfg.Sink.Kafka
	}
	r := &Relay{
		rc:           cfg.Replication.WithDefaults(),
		mc:           mc,
		dc:           cfg.Decode,
		sc:           cfg.Sink,
		log:          log,
		metrics:      m,
		lagWarnBytes: cfg.LagWarnBytes,
		nullSink:     cfg.NullSink,
		recovery:     cfg.RecoveryConfig(),
		standbyURL:   cfg.StandbyURL,
		abort:        make(chan struct{}),
		iso:          sink.NewIsolation(),
		topics:       sink.NewCreatedTopics(),
	}
	var err error
	if r.tracing, err = newTracing(cfg, m, log); err != nil { // tracing.go
		return nil, err
	}
	r.hist.useShared(cfg.Markers)
	r.register()
	return r, nil
}

// Abort ends a graceful stop at once: the attempt's connections are closed
// without waiting for Kafka. Safe to call from any goroutine, more than once.
func (r *Relay) Abort() { r.abortOnce.Do(func() { close(r.abort) }) }

// IsSetupError reports whether err is one a person must fix in PostgreSQL,
// Kafka or walrelay's flags: retrying does not help.
func IsSetupError(err error) bool {
	return errors.Is(err, replication.ErrSetup) || errors.Is(err, sink.ErrTopicMissing) || errors.Is(err, ErrColumns) ||
		errors.Is(err, sink.ErrExactlyOnceSetup) || errors.Is(err, sink.ErrTransactionTooLong) ||
		errors.Is(err, kafkastate.ErrSetup)
}

// permanent errors stop the relay; everything else restarts it from the
// last confirmed position.
func permanent(err error) bool {
	return IsSetupError(err) || errors.Is(err, replication.ErrSlotLost) || errors.Is(err, sink.ErrPoison)
}

// Run relays until ctx is cancelled or an attempt fails permanently.
//
// Cancelling ctx stops gracefully: the transaction being received is
// finished, outstanding acknowledgements are awaited up to the replication
// ShutdownTimeout, the final status update is sent, and Run returns
// ctx.Err(). Abort cuts that short; Run then returns the attempt's error
// (context.Canceled, or one that wraps it, when nothing else failed).
func (r *Relay) Run(ctx context.Context) error {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-r.abort:
			cancel()
		case <-actx.Done():
		}
	}()
	defer context.AfterFunc(ctx, func() { r.stopBy.Store(time.Now().Add(r.rc.ShutdownTimeout).UnixNano()) })()
	defer r.closeOrAbort("slot marker's kafka client", r.hist.close)
	defer r.tracing.flush(r.log, r.rc.ShutdownTimeout)
	err := r.run(actx, ctx.Done())
	if err == nil {
		return ctx.Err()
	}
	return err
}

// run runs attempts until stop is closed (nil), ctx is cancelled, or an
// attempt fails permanently.
func (r *Relay) run(ctx context.Context, stop <-chan struct{}) error {
	const minBackoff, maxBackoff = 500 * time.Millisecond, 30 * time.Second
	backoff := minBackoff
	var waiting error // the sentinel of the wait being logged, if any
	streamed := false // an attempt held the slot: credentials worked once
	r.beat.Store(time.Now().UnixNano())
	defer r.metrics.SetState(metrics.StateStopping)
	if err := r.backfill(ctx, stop); err != nil {
		return err
	}
	select {
	case <-stop: // stopped while waiting for another's backfill
		return nil
	default:
	}
	for {
		started := time.Now()
		err := r.attempt(ctx, stop)
		r.beat.Store(time.Now().UnixNano())
		if err == nil || ctx.Err() != nil {
			return err
		}
		if r.recoverable(err) {
			// N.B. a recovery that failed on the way (Kafka, a connection)
			// is retried as an attempt is: the next one finds the slot
			// gone, or the recovery unfinished, again.
			rerr := r.recover(ctx)
			if rerr == nil {
				continue
			}
			if IsSetupError(rerr) || ctx.Err() != nil {
				return rerr
			}
			err = rerr
		}
		if permanent(err) {
			return err
		}
		if p := r.current.Load(); p != nil && p.stream.Streamed() {
			streamed = true
		}
		// N.B. a login refused before walrelay ever streamed is a
		// configuration mistake (RefusalHint); after, it is retried, but
		// for an ACL or a codec Kafka refuses (RefusedAlways).
		if hint, ok := RefusalHint(err, r.rc.ConnString); ok && (!streamed || RefusedAlways(err)) {
			return &refusedError{err: err, hint: hint}
		}
		select {
		case <-stop:
			r.log.Warn("stopped while restarting", zap.Error(err))
			return nil
		default:
		}
		r.metrics.Restarts.WithLabelValues(cause(err)).Inc()
		// N.B. an attempt that streamed was healthy: the next failure is a
		// new one, not a repeat, and waits the least.
		if p := r.current.Load(); time.Since(started) > time.Minute || p != nil && p.stream.Streamed() {
			backoff = minBackoff
		}
		wait := backoff
		if kind, msg := waitFor(err); kind != nil {
			// N.B. a standby polls the slot quickly so that it takes over
			// within seconds of the active instance going away, or of the
			// slot becoming ready.
			wait = time.Second
			r.enterWait(msg)
			if waiting != kind {
				r.log.Info(msg, zap.String("slot", r.rc.Slot), zap.Error(err))
			}
			waiting = kind
		} else {
			waiting = nil
			msg := err.Error()
			r.failure.Store(&msg)
			r.metrics.SetState(metrics.StateRestarting)
			switch {
			case streamed:
				r.log.Warn("restarting from the last confirmed position", zap.Error(err), zap.Duration("backoff", wait))
			case connectFailed(err):
				r.log.Warn("cannot connect to PostgreSQL, never connected yet: retrying; if it persists check --pg-url (WALRELAY_PG_URL)",
					zap.String("connecting_to", pgcatalog.DescribeConn(r.rc.ConnString)), zap.Error(err), zap.Duration("backoff", wait))
			default:
				r.log.Warn("start failed, not streamed yet: retrying", zap.Error(err), zap.Duration("backoff", wait))
			}
			backoff = min(backoff*2, maxBackoff)
		}
		select {
		case <-time.After(wait):
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// enterWait shows a wait for the slot (waitFor's msg) in the state metric
// and /readyz.
func (r *Relay) enterWait(msg string) {
	r.metrics.SetState(metrics.StateWaiting)
	r.waitingFor.Store(&msg)
}

// waitFor says whether err means the slot is not ours yet (not a failure):
// which wait it is, and what to log once when it starts.
func waitFor(err error) (kind error, msg string) {
	switch {
	case errors.Is(err, replication.ErrSlotInUse):
		return replication.ErrSlotInUse, "slot is streamed by another process; waiting to take over"
	case errors.Is(err, replication.ErrSlotNotReady):
		return replication.ErrSlotNotReady, "slot is being created by another session; waiting until it is ready"
	case errors.Is(err, replication.ErrSlotRecovering):
		return replication.ErrSlotRecovering, "slot is being recovered from the outbox table by another walrelay; waiting until it finishes"
	}
	return nil, ""
}

// stageError marks which side an attempt failed on.
type stageError struct {
	cause string // postgres or kafka
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

func onPostgres(err error) error {
	if err == nil {
		return nil
	}
	return &stageError{cause: "postgres", err: err}
}

func onKafka(err error) error {
	if err == nil {
		return nil
	}
	return &stageError{cause: "kafka", err: err}
}

// cause classifies a restart for walrelay_restarts_total.
func cause(err error) string {
	var se *stageError
	if errors.As(err, &se) {
		return se.cause
	}
	return "other"
}
