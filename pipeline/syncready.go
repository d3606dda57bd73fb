package pipeline

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

const (
	// nudgeGap is the least time between two rounds of making the
	// standby's copy of the slot synchronizable (pgcatalog.SyncNudge): a
	// running-transactions record, its confirmation, a wake of the slot
	// sync worker.
	nudgeGap = 500 * time.Millisecond
	// blindNudges is how long, without --pg-standby-url, walrelay logs
	// running-transactions records after it starts streaming a failover
	// slot: a standby walrelay cannot see creates its copy within the slot
	// sync worker's longest nap (30 s) and persists it at its next cycle
	// after one of them was confirmed.
	blindNudges = time.Minute
)

// keepSyncReady makes the standby's copy of a failover slot synchronizable
// as soon as the slot streams, and reports whether it is (--pg-standby-url:
// walrelay_failover_ready and a log line at each change). Without a
// standby URL it logs running-transactions records for blindNudges, each
// once the one before is confirmed. It returns when ctx ends or done is
// closed; its failures are logged, never the relay's.
func (r *Relay) keepSyncReady(ctx context.Context, done <-chan struct{}, stream *replication.Stream, failover bool) error {
	if !failover {
		if r.standbyURL != "" {
			r.metrics.SetFailoverReady(false)
		}
		return nil
	}
	n := pgcatalog.NewSyncNudge(r.rc.ConnString, r.standbyURL, r.rc.Slot)
	defer n.Close()
	log := r.log.With(zap.String("slot", r.rc.Slot))
	var (
		pending            pglogrepl.LSN // a record logged, not yet confirmed
		lastRound, polled  time.Time
		streamed           time.Time
		ready, known       bool
		noSnapshot, noWake bool // refused: warned once, not asked again
		lastProblem        string
		rounds             int
	)
	// N.B. across attempts: a copy that was ready before a reconnect and
	// is not after it stopped being ready.
	known, ready = r.failoverReady.Load() != 0, r.failoverReady.Load() == 1
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-tick.C:
		}
		if !stream.Streaming() {
			continue
		}
		if streamed.IsZero() {
			log.Debug("keeping the standby's copy of the slot synchronizable", zap.Bool("known", known), zap.Bool("ready", ready))
		}
		if streamed.IsZero() {
			streamed = time.Now()
		}
		// N.B. one record at a time: the slot keeps one catalog_xmin
		// candidate until it is confirmed, so a second record logged
		// before that is passed over.
		if pending != 0 && stream.Confirmed() >= pending {
			pending = 0
			if r.standbyURL != "" && !noWake {
				wctx, cancel := context.WithTimeout(ctx, r.pollInterval())
				err := n.Wake(wctx)
				cancel()
				if errors.Is(err, pgcatalog.ErrNoPrivilege) {
					noWake = true
					log.Warn("cannot wake the standby's slot sync worker: it synchronizes the slot at its next cycle, up to 30 s later; to let walrelay wake it, GRANT EXECUTE ON FUNCTION pg_reload_conf() TO the walrelay role (on the primary)", zap.Error(err))
				}
			}
		}
		if r.standbyURL != "" {
			poll := nudgeGap / 2
			if ready {
				poll = r.pollInterval()
			}
			if time.Since(polled) < poll {
				continue
			}
			polled = time.Now()
			qctx, cancel := context.WithTimeout(ctx, r.pollInterval())
			ss, err := n.Standby(qctx)
			cancel()
			if err != nil {
				if msg := err.Error(); msg != lastProblem {
					lastProblem = msg
					log.Warn("cannot read the slot's copy on the standby (--pg-standby-url)", zap.Error(err))
				}
				continue
			}
			lastProblem = ""
			log.Debug("read the standby's copy of the slot", zap.Bool("ready", ss.Ready()), zap.Bool("in_recovery", ss.InRecovery), zap.Bool("exists", ss.Exists))
			r.metrics.SetFailoverReady(ss.Ready())
			if now := ss.Ready(); now != ready || !known {
				if now {
					log.Info("failover ready: the standby holds a synchronized copy of the slot", zap.Stringer("lsn", ss.Confirmed),
						zap.Duration("after_streaming", time.Since(streamed).Round(time.Millisecond)))
				} else {
					// N.B. at a start the copy is not ready yet as a
					// rule: a warning only when a ready copy stops
					// being.
					lvl := zap.InfoLevel
					if known {
						lvl = zap.WarnLevel
					}
					log.Log(lvl, "not failover ready: the standby's copy of the slot would not serve after a promotion; walrelay makes it synchronizable",
						zap.String("reason", strings.Join(ss.Problems(r.rc.Slot), "; ")))
				}
				ready, known = now, true
				rounds = 0
				state := int32(2)
				if now {
					state = 1
				}
				r.failoverReady.Store(state)
			}
			// N.B. a server out of recovery (promoted) has no copy to
			// make ready: nothing is logged for it.
			if ready || !ss.InRecovery {
				continue
			}
		} else if time.Since(streamed) > blindNudges {
			return nil
		}
		// N.B. a record not yet confirmed (a stream held back) waits:
		// the standby's copy is read all the same.
		if pending != 0 {
			continue
		}
		// N.B. a copy that stays unready (a standby set up wrong) gets a
		// record every 15 s after the first ten, as the bgwriter's pace.
		gap := nudgeGap
		if rounds > 10 {
			gap = 15 * time.Second
		}
		if noSnapshot || time.Since(lastRound) < gap {
			continue
		}
		lastRound = time.Now()
		rounds++
		sctx, cancel := context.WithTimeout(ctx, r.pollInterval())
		lsn, err := n.LogSnapshot(sctx)
		cancel()
		switch {
		case errors.Is(err, pgcatalog.ErrNoPrivilege):
			noSnapshot = true
			log.Warn("cannot log a running-transactions record: a standby synchronizes the new failover slot only after the server logs one by itself (every 15 s while it writes) and walrelay confirms past it; to let walrelay log one at once, GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO the walrelay role", zap.Error(err))
		case err != nil:
			log.Debug("log a running-transactions record", zap.Error(err))
		default:
			pending = lsn
			log.Debug("logged a running-transactions record for the standby's copy of the slot", zap.Stringer("lsn", lsn))
		}
	}
}
