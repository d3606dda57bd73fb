package recovery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// plan is what Run found before it changes anything.
type plan struct {
	sys, db string
	marker  kafkastate.Marker
	found   bool
	exists  bool // the slot exists
	sel     pgcatalog.RowSelection
}

// Run recovers (Recover) or backfills (Backfill) cfg's slot: see the
// package's doc. A mistake a person must fix wraps replication.ErrSetup
// (exit 2); nothing to do is an Account with Nothing set and no error.
func Run(ctx context.Context, cfg Config, kind Kind, log *zap.Logger) (Account, error) {
	log = log.Named("recovery")
	rc := cfg.Replication.WithDefaults()
	mc := cfg.Marker
	if len(mc.Brokers) == 0 {
		mc.Brokers, mc.Kafka = cfg.Sink.Brokers, cfg.Sink.Kafka
	}
	acc := Account{Kind: kind, Slot: rc.Slot}
	if err := cfg.Options.Validate(); err != nil {
		return acc, fmt.Errorf("%w: %w", replication.ErrSetup, err)
	}
	if rc.NoTables {
		return acc, fmt.Errorf("%w: --source messages reads no outbox table: the events of pg_logical_emit_message are in the WAL alone, and a lost slot's cannot be recovered", replication.ErrSetup)
	}
	conn, err := pgcatalog.OpenCommandConn(ctx, rc.ConnString)
	if err != nil {
		return acc, fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close()
	// N.B. the lock before the marker is read: a recovery the marker calls
	// unfinished has ended (its session with it) once the lock is ours,
	// and one that runs is waited for, never started over beside it.
	if locked, err := conn.LockRecovery(ctx, rc.Slot); err != nil {
		return acc, err
	} else if !locked {
		return acc, fmt.Errorf("%w: another walrelay is recovering slot %q from the outbox table now (its PostgreSQL session holds the recovery's lock): wait for it to finish", replication.ErrSlotRecovering, rc.Slot)
	}
	var p plan
	if p.db, err = conn.Database(ctx); err != nil {
		return acc, fmt.Errorf("read database: %w", err)
	}
	if p.sys, err = pgcatalog.SystemID(ctx, rc); err != nil {
		return acc, err
	}
	if p.exists, err = conn.SlotExists(ctx, rc.Slot); err != nil {
		return acc, fmt.Errorf("look up replication slot: %w", err)
	}
	ms, err := kafkastate.Open(ctx, mc, log)
	if err != nil {
		return acc, err
	}
	defer ms.Close()
	if p.marker, p.found, err = ms.Read(ctx, p.sys, p.db, rc.Slot); err != nil {
		return acc, err
	}
	if acc.Nothing = nothingToDo(kind, p); acc.Nothing != "" {
		return acc, nil
	}
	if err := choose(ctx, cfg, kind, &p, &acc); err != nil {
		return acc, err
	}
	if err := pgcatalog.PrepareBeforeSlot(ctx, rc, log); err != nil {
		return acc, err
	}
	// N.B. from here on the marker says the recovery is unfinished: a slot
	// created by it is never streamed from until every row it read is
	// acknowledged, and a recovery started again drops it.
	m := p.marker
	if !p.found {
		m = kafkastate.Marker{Slot: rc.Slot, Database: p.db, SystemIdentifier: p.sys, ConfirmedLSN: pglogrepl.LSN(0).String()}
	}
	m.Recovery = &kafkastate.Recovery{Kind: string(kind), StartedAt: time.Now().UTC()}
	m.UpdatedAt = time.Time{}
	if err := ms.Write(ctx, m); err != nil {
		return acc, err
	}
	if p.exists {
		log.Warn("dropping the slot of an unfinished recovery (never streamed from) to start again", zap.String("slot", rc.Slot))
		if err := conn.DropSlot(ctx, rc.Slot); err != nil {
			return acc, err
		}
	}
	created := time.Now().UTC()
	slot, err := pgcatalog.CreateSnapshotSlot(ctx, rc, log)
	if err != nil {
		return acc, err
	}
	defer slot.Close(context.WithoutCancel(ctx))
	acc.ConsistentPoint = slot.ConsistentPoint
	if err := publish(ctx, cfg, kind, slot.Snapshot, p.sel, &acc, log); err != nil {
		return acc, err
	}
	// N.B. every recovered row is acknowledged: the slot may be streamed
	// from its consistent point. Every transaction after that point
	// committed after the slot's creation began.
	done := kafkastate.Marker{Slot: rc.Slot, Database: p.db, SystemIdentifier: p.sys,
		ConfirmedLSN: slot.ConsistentPoint.String(), ConfirmedCommitTime: created}
	if err := conn.HoldsRecoveryLock(ctx, rc.Slot); err != nil {
		return acc, err
	}
	if err := ms.Write(ctx, done); err != nil {
		return acc, err
	}
	acc.Marker, acc.Done = done, true
	return acc, nil
}

// nothingToDo says why kind has nothing to do with the slot and its marker
// as found, or "".
func nothingToDo(kind Kind, p plan) string {
	unfinished := p.found && p.marker.Recovery != nil
	switch {
	case unfinished:
		return ""
	case kind == Recover && !p.found:
		return "no marker of this slot on the state topic: walrelay never streamed from it on this system, so nothing was lost; start walrelay (run --backfill publishes the rows already in the outbox)"
	case kind == Recover && p.exists:
		return "the slot exists: nothing to recover; walrelay run streams from it"
	case kind == Backfill && p.found && p.exists:
		return "walrelay has streamed from this slot: nothing to backfill"
	case kind == Backfill && p.found:
		return "the slot walrelay streamed from is gone: that is `walrelay recover` (or --recover-missing-slot), not a backfill"
	}
	return ""
}

// choose decides which rows are read and in what order, refusing (exit 2)
// when no order can be had.
func choose(ctx context.Context, cfg Config, kind Kind, p *plan, acc *Account) error {
	o := cfg.Options
	r, err := pgcatalog.OpenSnapshot(ctx, cfg.Replication.ConnString, "")
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	track, err := r.TrackCommitTimestamp(ctx)
	if err != nil {
		return err
	}
	col := o.Column
	switch {
	case col == "" && !track:
		return fmt.Errorf("%w: recovery needs an order for the rows of each aggregate and a way to choose the rows committed since the slot's last confirmed position: track_commit_timestamp is off and no --recover-column is given: name a timestamp column the application sets at insert (--recover-column created_at; ALTER TABLE ... ADD COLUMN created_at timestamptz NOT NULL DEFAULT now() for the future), or turn commit timestamps on (ALTER SYSTEM SET track_commit_timestamp = on; then restart PostgreSQL: it covers the transactions committed after that)", replication.ErrSetup)
	case col == commitTimeColumn && !track:
		return fmt.Errorf("%w: --recover-column %s needs track_commit_timestamp = on (ALTER SYSTEM SET track_commit_timestamp = on; then restart PostgreSQL), or name a timestamp column set at insert (--recover-column created_at)", replication.ErrSetup, commitTimeColumn)
	case col == "":
		col = commitTimeColumn
	}
	for _, t := range cfg.Replication.Tables {
		if _, err := r.Relation(ctx, t, col); err != nil {
			return err
		}
	}
	p.sel = pgcatalog.RowSelection{Column: col, CommitTime: track}
	acc.Column, acc.Order = col, col
	if track {
		acc.Order = "pg_xact_commit_timestamp(xmin)"
		if col != commitTimeColumn {
			acc.Order += ", then " + col
		}
	}
	switch {
	case kind == Backfill || o.All:
		acc.Since = "every row"
	case p.marker.ConfirmedCommitTime.IsZero():
		acc.Since = "every row"
		acc.NotRecovered = append(acc.NotRecovered, "the slot's marker records no commit time (written by an older walrelay, or before any transaction was relayed): every row is read")
	default:
		p.sel.Since = p.marker.ConfirmedCommitTime.Add(-o.Margin)
		acc.Since = fmt.Sprintf("%s at or after %s (the marker's commit time %s at %s minus --recover-margin %s)", col,
			p.sel.Since.Format(time.RFC3339Nano), p.marker.ConfirmedCommitTime.Format(time.RFC3339Nano), p.marker.ConfirmedLSN, o.Margin)
	}
	// N.B. past the window, a retention sized to it (docs/operate.md,
	// "Retention") may have removed rows the recovery would read.
	if age := time.Since(p.marker.ConfirmedCommitTime); kind == Recover && !p.marker.ConfirmedCommitTime.IsZero() && age > o.Window {
		acc.NotRecovered = append(acc.NotRecovered, fmt.Sprintf("rows the outbox's retention removed: the slot's last confirmed commit (%s) is %s old, longer than --recovery-window %s, so a retention sized to the window (--recovery-window plus --recover-margin) may have removed rows committed since; they cannot be recovered, and how many cannot be known",
			p.marker.ConfirmedCommitTime.Format(time.RFC3339Nano), age.Round(time.Second), o.Window))
	}
	return nil
}
