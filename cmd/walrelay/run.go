package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// relay wires the stages back to front and restarts them after failures.
type relay struct {
	rc           replication.Config
	dc           decode.Config
	sc           sink.Config
	log          *zap.Logger
	metrics      *metrics.Metrics
	lagWarnBytes int64

	beat    atomic.Int64 // unix nanoseconds: the run loop's last turn
	current atomic.Pointer[pipeline]
	kafkaOK atomic.Bool

	// iso outlives the attempts: after Kafka rejected a record batch, the
	// next attempts produce its topic's records one at a time until the
	// record at fault is found (sink.Isolation).
	iso *sink.Isolation
}

// pipeline is the live state of one attempt, read by the HTTP handlers and
// the metrics.
type pipeline struct {
	stream *replication.Stream
	tr     *checkpoint.Tracker
	snk    *sink.Sink
}

// healthy: the process runs and its loops turn.
func (r *relay) healthy() (bool, string) {
	limit := max(3*r.rc.StatusInterval, 30*time.Second)
	last := time.Unix(0, r.beat.Load())
	if p := r.current.Load(); p != nil && p.stream.Beat().After(last) {
		last = p.stream.Beat()
	}
	if age := time.Since(last); age > limit {
		return false, fmt.Sprintf("no loop has turned for %s", age.Round(time.Second))
	}
	return true, ""
}

// ready: this instance holds the slot and streams, and Kafka answers.
func (r *relay) ready() (bool, string) {
	p := r.current.Load()
	switch {
	case p == nil || !p.stream.Streaming():
		return false, "not streaming: " + r.metrics.State()
	case !r.kafkaOK.Load():
		return false, "kafka does not answer"
	}
	return true, ""
}

// register adds the metrics read from the live pipeline.
func (r *relay) register() {
	gauge := func(name, help string, f func(p *pipeline) float64) {
		r.metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if p := r.current.Load(); p != nil {
				return f(p)
			}
			return 0
		}))
	}
	gauge("walrelay_inflight_events", "Events produced and not yet acknowledged by Kafka.", func(p *pipeline) float64 {
		recs, _, _ := p.tr.InFlight()
		return float64(recs)
	})
	gauge("walrelay_inflight_bytes", "Bytes counted against --max-inflight-bytes: records buffered in the Kafka client or in flight, each with its key, value, headers and 1 KiB of overhead.", func(p *pipeline) float64 {
		return float64(p.snk.InflightBytes())
	})
	gauge("walrelay_oldest_unacked_seconds", "Age of the oldest transaction not yet fully acknowledged by Kafka.", func(p *pipeline) float64 {
		if _, _, oldest := p.tr.InFlight(); !oldest.IsZero() {
			return time.Since(oldest).Seconds()
		}
		return 0
	})
	gauge("walrelay_received_lsn", "WAL start of the last message received (bytes).", func(p *pipeline) float64 { return float64(p.stream.Received()) })
	gauge("walrelay_confirmed_lsn", "Flush position last confirmed to PostgreSQL (bytes).", func(p *pipeline) float64 { return float64(p.stream.Confirmed()) })
	gauge("walrelay_server_wal_end_lsn", "Server WAL end from the last keepalive (bytes).", func(p *pipeline) float64 { return float64(p.stream.ServerWALEnd()) })
	r.metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "walrelay_ready", Help: "1 while this instance holds the slot, streams, and Kafka answers.",
	}, func() float64 {
		if ok, _ := r.ready(); ok {
			return 1
		}
		return 0
	}))
}

// progressInterval is how often the log says where the stream stands.
const progressInterval = 30 * time.Second

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// bufferMessages is the capacity of the channel between replication and
// decoding; the bytes in flight to Kafka are bounded by the sink.
const bufferMessages = 1024

func isConfigError(err error) bool {
	return errors.Is(err, replication.ErrSetup) || errors.Is(err, sink.ErrTopicMissing) || errors.Is(err, errColumns)
}

// permanent errors stop the relay; everything else restarts it from the
// last confirmed position.
func permanent(err error) bool {
	return isConfigError(err) || errors.Is(err, replication.ErrSlotLost) || errors.Is(err, sink.ErrPoison)
}

// run runs attempts until stop is closed (nil), ctx is cancelled, or an
// attempt fails permanently.
func (r *relay) run(ctx context.Context, stop <-chan struct{}) error {
	const minBackoff, maxBackoff = 500 * time.Millisecond, 30 * time.Second
	backoff := minBackoff
	var waiting error // the sentinel of the wait being logged, if any
	if r.iso == nil {
		r.iso = sink.NewIsolation()
	}
	r.beat.Store(time.Now().UnixNano())
	defer r.metrics.SetState(metrics.StateStopping)
	for {
		started := time.Now()
		err := r.attempt(ctx, stop)
		r.beat.Store(time.Now().UnixNano())
		if err == nil || ctx.Err() != nil {
			return err
		}
		if permanent(err) {
			return err
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
			r.metrics.SetState(metrics.StateWaiting)
			if waiting != kind {
				r.log.Info(msg, zap.String("slot", r.rc.Slot), zap.Error(err))
			}
			waiting = kind
		} else {
			waiting = nil
			r.metrics.SetState(metrics.StateRestarting)
			r.log.Warn("restarting from the last confirmed position", zap.Error(err), zap.Duration("backoff", wait))
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

// waitFor says whether err means the slot is not ours yet (not a failure):
// which wait it is, and what to log once when it starts.
func waitFor(err error) (kind error, msg string) {
	switch {
	case errors.Is(err, replication.ErrSlotInUse):
		return replication.ErrSlotInUse, "slot is streamed by another process; waiting to take over"
	case errors.Is(err, replication.ErrSlotNotReady):
		return replication.ErrSlotNotReady, "slot is being created by another session; waiting until it is ready"
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

// attempt runs one pipeline: one replication connection, one Kafka client,
// one checkpoint tracker starting at the slot's confirmed position.
func (r *relay) attempt(ctx context.Context, stop <-chan struct{}) error {
	r.current.Store(nil)
	// Columns first: nothing is created for a mapping that cannot work.
	if err := checkColumns(ctx, r.rc.ConnString, r.dc); err != nil {
		return onPostgres(err)
	}
	st, err := replication.Prepare(ctx, r.rc, r.log)
	if err != nil {
		return onPostgres(err)
	}
	tr := checkpoint.New(st.ConfirmedFlush)
	sc := r.sc
	sc.Metrics = r.metrics
	sc.Isolation = r.iso
	snk, err := sink.New(sc, tr, r.log)
	if err != nil {
		return err
	}
	// N.B. on any failure the client is discarded with whatever it still
	// holds; the next attempt re-reads from the confirmed position.
	defer snk.Close()
	if err := snk.Start(ctx); err != nil {
		r.kafkaOK.Store(false)
		return onKafka(err)
	}
	r.kafkaOK.Store(true)
	dc := r.dc
	dc.ResolvePartitions = true
	dec, err := decode.New(dc, r.log)
	if err != nil {
		return err
	}
	roots := replication.NewRoots(r.rc)
	defer roots.Close()
	stream := replication.New(r.rc, tr, r.log)
	r.current.Store(&pipeline{stream: stream, tr: tr, snk: snk})
	msgs := make(chan replication.Message, bufferMessages)
	drained := make(chan struct{})
	pipelineDone := make(chan struct{})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return onPostgres(stream.Run(gctx, stop, st.ConfirmedFlush, msgs, drained))
	})
	g.Go(func() error {
		defer close(pipelineDone)
		var ignored uint64
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					r.metrics.SetState(metrics.StateStopping)
					return r.drain(gctx, snk, tr, drained)
				}
				tx, err := dec.Decode(m.Data)
				stream.Done(m)
				if err != nil {
					return fmt.Errorf("decode message at %s: %w", m.WALStart, err)
				}
				// N.B. a relation that is not an outbox may be an outbox's
				// partition: asked once per Relation message, before any
				// row of it is decoded, so that its rows are never taken
				// for another table's and confirmed past.
				for oid, _, ok := dec.Unresolved(); ok; oid, _, ok = dec.Unresolved() {
					root, exists, err := roots.Root(gctx, oid)
					if err != nil {
						return onPostgres(err)
					}
					if err := dec.Resolve(oid, root, exists); err != nil {
						return err
					}
				}
				if tx == nil {
					continue
				}
				if err := snk.Produce(gctx, tx); err != nil {
					return onKafka(err)
				}
				if tx.Last {
					r.metrics.Transactions.Inc()
					if n := dec.Stats.Ignored; n != ignored {
						r.metrics.Ignored.Add(float64(n - ignored))
						ignored = n
					}
				}
			case <-snk.Failed():
				return onKafka(snk.Err())
			case <-gctx.Done():
				// The replication stage failed (or the relay aborts): it
				// leaves msgs open, so stop here.
				return gctx.Err()
			}
		}
	})
	g.Go(func() error { return r.watch(gctx, pipelineDone, stream, snk, tr) })
	return g.Wait()
}

// watch polls the slot and Kafka while the pipeline runs: it sets the
// state, warns about lag, and stops the relay if the slot is lost.
func (r *relay) watch(ctx context.Context, done <-chan struct{}, stream *replication.Stream, snk *sink.Sink, tr *checkpoint.Tracker) error {
	interval := min(r.rc.StatusInterval, 5*time.Second)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var lastPoll time.Time
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	var lastWarn time.Time
	lastProgress, lastTx := time.Now(), uint64(0)
	for {
		if stream.Streaming() && r.metrics.State() != metrics.StateStopping {
			r.metrics.SetState(metrics.StateStreaming)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-tick.C:
		}
		if time.Since(lastProgress) >= progressInterval {
			// One line now and then says where the stream stands, so that a
			// stall shows in the log without metrics.
			recs, txs, _ := tr.InFlight()
			n := uint64(counterValue(r.metrics.Transactions))
			r.log.Info("progress", zap.Uint64("transactions", n-lastTx), zap.Duration("period", time.Since(lastProgress).Round(time.Second)),
				zap.Stringer("received_lsn", stream.Received()), zap.Stringer("confirmed_lsn", stream.Confirmed()),
				zap.Stringer("server_wal_end", stream.ServerWALEnd()), zap.Int64("inflight_records", recs), zap.Int64("inflight_transactions", txs))
			lastProgress, lastTx = time.Now(), n
		}
		if time.Since(lastPoll) < interval {
			continue
		}
		lastPoll = time.Now()
		pctx, cancel := context.WithTimeout(ctx, interval)
		r.kafkaOK.Store(snk.Ping(pctx) == nil)
		if conn == nil {
			conn, _ = pgx.Connect(pctx, r.rc.ConnString)
		}
		if conn != nil {
			st, err := replication.QuerySlot(pctx, conn, r.rc.Slot)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
			} else {
				r.metrics.SlotLagBytes.Set(float64(st.LagBytes))
				r.metrics.SetWALStatus(st.WALStatus)
				if st.SafeWALSize != nil {
					r.metrics.SlotSafeWALSize.Set(float64(*st.SafeWALSize))
				} else {
					r.metrics.SlotSafeWALSize.Set(math.NaN())
				}
				if st.WALStatus == "lost" {
					cancel()
					return fmt.Errorf("%w: slot %q has wal_status lost while streaming: PostgreSQL removed WAL it still needed (max_slot_wal_keep_size)", replication.ErrSlotLost, r.rc.Slot)
				}
				if r.lagWarnBytes > 0 && st.LagBytes > r.lagWarnBytes && time.Since(lastWarn) > time.Minute {
					lastWarn = time.Now()
					r.log.Warn("slot lag above --lag-warn-bytes", zap.String("slot", r.rc.Slot), zap.Int64("lag_bytes", st.LagBytes),
						zap.String("wal_status", st.WALStatus), zap.Int64p("safe_wal_size", st.SafeWALSize))
				}
			}
		}
		cancel()
	}
}

// drain waits for outstanding acknowledgements after a graceful stop, then
// lets the replication stage send its final status update.
func (r *relay) drain(ctx context.Context, snk *sink.Sink, tr *checkpoint.Tracker, drained chan<- struct{}) error {
	defer close(drained)
	fctx, cancel := context.WithTimeout(ctx, r.rc.ShutdownTimeout)
	defer cancel()
	err := snk.Flush(fctx)
	if err != nil && snk.Err() != nil {
		return snk.Err()
	}
	if err != nil {
		recs, _, _ := tr.InFlight()
		r.log.Warn("shutdown timeout: unacknowledged records will be sent again on restart", zap.Int64("records", recs), zap.Error(err))
	}
	return nil
}

var errColumns = errors.New("outbox table lacks a mapped column")

// mappedColumns returns each column the mapping and the topic template
// name, with the flag that names it.
func mappedColumns(dc decode.Config) (map[string]string, error) {
	tmpl, err := decode.ParseTemplate(dc.Topic)
	if err != nil {
		return nil, err
	}
	want := map[string]string{dc.IDColumn: "--id-column", dc.KeyColumn: "--key-column", dc.PayloadColumn: "--payload-column"}
	for _, h := range dc.HeaderColumns {
		want[h.Column] = "--header-columns"
	}
	for _, c := range tmpl.Columns() {
		want[c] = "--topic"
	}
	return want, nil
}

// checkColumns verifies before streaming that each outbox table has every
// column the mapping and the topic template name.
func checkColumns(ctx context.Context, connString string, dc decode.Config) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	want, err := mappedColumns(dc)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range dc.Tables {
		schema, table, _ := decode.SplitTable(t)
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_attribute a
			JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, schema, table)
		if err != nil {
			return fmt.Errorf("list columns of %s: %w", t, err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("list columns of %s: %w", t, err)
		}
		if len(cols) == 0 {
			continue // a missing table is reported by the setup checks
		}
		have := map[string]bool{}
		for _, c := range cols {
			have[c] = true
		}
		for col, flag := range want {
			if !have[col] {
				errs = append(errs, fmt.Errorf("table %s has no column %q (named by %s); its columns are %s", t, col, flag, strings.Join(cols, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errColumns, errors.Join(errs...))
	}
	return nil
}
