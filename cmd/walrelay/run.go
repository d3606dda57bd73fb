package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// relay wires the stages back to front and restarts them after failures.
type relay struct {
	rc  replication.Config
	dc  decode.Config
	sc  sink.Config
	log *zap.Logger
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
	waiting := false
	for {
		started := time.Now()
		err := r.attempt(ctx, stop)
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
		if time.Since(started) > time.Minute {
			backoff = minBackoff
		}
		wait := backoff
		if errors.Is(err, replication.ErrSlotInUse) {
			// N.B. a standby polls the slot quickly so that it takes over
			// within seconds of the active instance going away.
			wait = time.Second
			if !waiting {
				r.log.Info("slot is streamed by another process; waiting to take over", zap.String("slot", r.rc.Slot), zap.Error(err))
			}
			waiting = true
		} else {
			waiting = false
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

// attempt runs one pipeline: one replication connection, one Kafka client,
// one checkpoint tracker starting at the slot's confirmed position.
func (r *relay) attempt(ctx context.Context, stop <-chan struct{}) error {
	st, err := replication.Prepare(ctx, r.rc, r.log)
	if err != nil {
		return err
	}
	if err := checkColumns(ctx, r.rc.ConnString, r.dc); err != nil {
		return err
	}
	tr := checkpoint.New(st.ConfirmedFlush)
	snk, err := sink.New(r.sc, tr, r.log)
	if err != nil {
		return err
	}
	// N.B. on any failure the client is discarded with whatever it still
	// holds; the next attempt re-reads from the confirmed position.
	defer snk.Close()
	if err := snk.Ping(ctx); err != nil {
		return err
	}
	dec, err := decode.New(r.dc, r.log)
	if err != nil {
		return err
	}
	stream := replication.New(r.rc, tr, r.log)
	msgs := make(chan replication.Message, bufferMessages)
	drained := make(chan struct{})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return stream.Run(gctx, stop, st.ConfirmedFlush, msgs, drained)
	})
	g.Go(func() error {
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					return r.drain(gctx, snk, tr, drained)
				}
				tx, err := dec.Decode(m.Data)
				if err != nil {
					return fmt.Errorf("decode message at %s: %w", m.WALStart, err)
				}
				if tx == nil {
					continue
				}
				if err := snk.Produce(gctx, tx); err != nil {
					return err
				}
			case <-snk.Failed():
				return snk.Err()
			}
		}
	})
	return g.Wait()
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

var errColumns = errors.New("outbox columns")

// checkColumns verifies before streaming that each outbox table has every
// column the mapping and the topic template name.
func checkColumns(ctx context.Context, connString string, dc decode.Config) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tmpl, err := decode.ParseTemplate(dc.Topic)
	if err != nil {
		return err
	}
	want := map[string]string{dc.IDColumn: "--id-column", dc.KeyColumn: "--key-column", dc.PayloadColumn: "--payload-column"}
	for _, h := range dc.HeaderColumns {
		want[h.Column] = "--header-columns"
	}
	for _, c := range tmpl.Columns() {
		want[c] = "--topic"
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
