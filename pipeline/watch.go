package pipeline

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// progressInterval is how often the log says where the stream stands.
const progressInterval = 30 * time.Second

// watch polls the slot and Kafka while the pipeline runs: it sets the
// state, warns about lag, and stops the relay if the slot is lost.
func (r *Relay) watch(ctx context.Context, done <-chan struct{}, stream *replication.Stream, snk *sink.Sink, tr *checkpoint.Tracker, ver *verifier) error {
	interval := r.pollInterval()
	// N.B. the publication check runs in rounds of its own, on its own
	// connection, as soon as acknowledged positions wait for it
	// (verify.go); the stream confirms nothing past what it covered, and
	// the receive loop never waits for it.
	vctx, vcancel := context.WithCancel(ctx)
	var verErr error
	verDone := make(chan struct{})
	go func() {
		defer close(verDone)
		verErr = ver.run(vctx, func() bool { return tr.Watermark() > ver.Verified() })
	}()
	defer func() { vcancel(); <-verDone }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var lastPoll time.Time
	// N.B. the ping under way ends with the loop, whatever ends it.
	pingCtx, stopPings := context.WithCancel(ctx)
	var pings kafkaPings
	defer func() { stopPings(); pings.wait() }()
	slot := pgcatalog.NewSlotReader(r.rc.ConnString, r.rc.Slot)
	defer slot.Close()
	var lastWarn time.Time
	lastProgress, lastTx := time.Now(), uint64(0)
	for {
		if stream.Streaming() && r.metrics.State() != metrics.StateStopping {
			r.metrics.SetState(metrics.StateStreaming)
		}
		if stream.Streaming() {
			// N.B. exactly-once: only the holder of the slot fences the
			// other producers of its transactional id.
			snk.HoldsSlot()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-verDone:
			return verErr
		case <-tick.C:
		}
		if time.Since(lastProgress) >= progressInterval {
			// One line now and then says where the stream stands, so that a
			// stall shows in the log without metrics.
			recs, txs, _ := tr.InFlight()
			n := r.metrics.TransactionCount()
			r.log.Info("progress", zap.Uint64("transactions", n-lastTx), zap.Duration("period", time.Since(lastProgress).Round(time.Second)),
				zap.Stringer("received_lsn", stream.Received()), zap.Stringer("confirmed_lsn", stream.Confirmed()),
				zap.Stringer("server_wal_end", stream.ServerWALEnd()), zap.Int64("inflight_records", recs), zap.Int64("inflight_transactions", txs))
			lastProgress, lastTx = time.Now(), n
		}
		if time.Since(lastPoll) < interval {
			continue
		}
		lastPoll = time.Now()
		// N.B. cut short by the end of the pipeline: a stop does not
		// wait on a silent PostgreSQL here.
		pctx, cancel := cancelOn(ctx, interval, done)
		pings.start(pingCtx, snk, r.kafkaGrace(), &r.kafkaAnswered)
		// A failed read (the connection, or the query) is retried at the
		// next poll, on a new connection.
		if st, err := slot.Read(pctx); err == nil {
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
			if w, err := slot.StandbyWait(pctx); err == nil {
				r.held.observe(w, max(stream.Received(), stream.ServerWALEnd(), stream.Confirmed()), r.metrics, r.log, r.rc.Slot)
			}
			if r.lagWarnBytes > 0 && st.LagBytes > r.lagWarnBytes && time.Since(lastWarn) > time.Minute {
				lastWarn = time.Now()
				r.log.Warn("slot lag above --lag-warn-bytes", zap.String("slot", r.rc.Slot), zap.Int64("lag_bytes", st.LagBytes),
					zap.String("wal_status", st.WALStatus), zap.Int64p("safe_wal_size", st.SafeWALSize))
			}
		}
		cancel()
	}
}
