package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

func (p *prep) slot(ctx context.Context) (string, error) {
	err := p.prepareSlot(ctx)
	st := p.st
	if errors.Is(err, replication.ErrSlotNotReady) && p.dryRun {
		return "being created by another session (no confirmed_flush_lsn yet): run waits until it is ready", nil
	}
	if errors.Is(err, replication.ErrSlotRecovering) && p.dryRun {
		return "being recovered from the outbox table by another walrelay: run waits until it finishes", nil
	}
	if err != nil {
		return "", err
	}
	if st.Created && p.dryRun {
		return "missing: will be created at start (--create)", nil
	}
	return fmt.Sprintf("confirmed_flush_lsn %s, wal_status %s", st.ConfirmedFlush, st.WALStatus), nil
}

// prepareSlot reads the slot into p.st, creating it when it is missing and
// new, and making it a failover slot when asked.
func (p *prep) prepareSlot(ctx context.Context) error {
	cfg, log := p.cfg, p.log
	wantFailover, err := failoverWanted(cfg.SlotFailover, p.st.ServerVersion)
	if err != nil && !p.dryRun {
		return err // a dry run reports it in "failover readiness"
	}
	cols := `plugin, slot_type, database, wal_status, confirmed_flush_lsn::text, active_pid, false, false`
	if p.st.ServerVersion >= failoverVersionNum {
		cols = `plugin, slot_type, database, wal_status, confirmed_flush_lsn::text, active_pid, failover, synced`
	}
	var plugin, slotType, slotDB, walStatus *string
	var confirmed *pglogrepl.LSN
	var activePID *int32
	err = p.conn.QueryRow(ctx, `SELECT `+cols+` FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).
		Scan(&plugin, &slotType, &slotDB, &walStatus, &confirmed, &activePID, &p.st.Failover, &p.st.Synced)
	if errors.Is(err, pgx.ErrNoRows) {
		return p.missingSlot(ctx, wantFailover)
	}
	if err != nil {
		return fmt.Errorf("look up replication slot: %w", err)
	}
	p.st.Exists = true
	if deref(slotType) != "logical" || deref(plugin) != "pgoutput" {
		return setupErrorf("replication slot %q uses %s plugin %q, walrelay needs a logical pgoutput slot: drop it (SELECT pg_drop_replication_slot('%s');) or choose another --slot",
			cfg.Slot, deref(slotType), deref(plugin), cfg.Slot)
	}
	if deref(slotDB) != p.db {
		return setupErrorf("replication slot %q belongs to database %q, not %q: connect to that database or choose another --slot", cfg.Slot, deref(slotDB), p.db)
	}
	if err := p.refuseTwoPhase(ctx); err != nil {
		return err
	}
	p.st.WALStatus = deref(walStatus)
	// N.B. only wal_status lost means lost. A slot without
	// confirmed_flush_lsn is being created by another session, waiting for
	// its consistent point (it ends once the transactions running then have
	// ended): it is not ready, never dropped, and waited for.
	if p.st.WALStatus != "lost" && confirmed == nil {
		holder := "another session"
		if activePID != nil {
			holder = fmt.Sprintf("the session of pid %d", *activePID)
		}
		return fmt.Errorf("%w: slot %q is being created by %s and has no confirmed_flush_lsn yet: PostgreSQL is waiting for the transactions running when its creation began to end", replication.ErrSlotNotReady, cfg.Slot, holder)
	}
	if p.st.WALStatus == "lost" && cfg.RecreateLostSlot && !p.dryRun {
		log.Error("replication slot lost: dropping and re-creating it as --recreate-lost-slot asks; events committed while the slot was behind were NOT relayed",
			zap.String("slot", cfg.Slot), zap.String("wal_status", p.st.WALStatus))
		if _, err := p.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, cfg.Slot); err != nil {
			return fmt.Errorf("drop lost replication slot: %w", err)
		}
		return p.createSlot(ctx, wantFailover)
	}
	if p.st.WALStatus == "lost" {
		return fmt.Errorf("%w: slot %q has wal_status %q: PostgreSQL removed WAL it still needed (max_slot_wal_keep_size), so events written while walrelay was behind are gone; start once with --recreate-lost-slot to drop and re-create it (see docs/operate.md, \"Slot lost\")", replication.ErrSlotLost, cfg.Slot, p.st.WALStatus)
	}
	p.st.ConfirmedFlush = *confirmed
	// N.B. ALTER_REPLICATION_SLOT works only while no one holds the slot:
	// before streaming, never while another instance streams it (that
	// instance, or this one once it takes over, does it).
	if wantFailover && !p.st.Failover && !p.dryRun && activePID == nil {
		switch err := alterFailover(ctx, cfg); {
		case errors.Is(err, replication.ErrSlotInUse):
		case err != nil:
			return err
		default:
			p.st.Failover = true
			log.Info("made the replication slot a failover slot", zap.String("slot", cfg.Slot))
		}
	}
	if cfg.History != nil && p.st.SystemID != "" {
		// N.B. a slot nobody streams is about to be ours: whether a
		// recovery of it is unfinished is read as of now (while another
		// session streams it, the attempt waits at START_REPLICATION).
		last := cfg.History.LastConfirmedNow
		if activePID != nil {
			last = cfg.History.LastConfirmed
		}
		rec, _, found, err := last(ctx, p.st.SystemID, p.db, cfg.Slot)
		if err != nil {
			return p.waitForRecovery(ctx, err)
		}
		if found {
			p.st.Recorded = rec
		}
		// N.B. a slot synchronized to a standby lags the primary's: after a
		// promotion it may be behind what walrelay confirmed there.
		// Streaming starts from the slot's position all the same: the
		// events between are relayed again (duplicates), none is skipped.
		if found && rec > p.st.ConfirmedFlush && !p.dryRun {
			log.Warn("the slot is behind the position walrelay confirmed on it before (a standby promoted with a synchronized slot lags the old primary): resuming from the slot; events between are sent again",
				zap.String("slot", cfg.Slot), zap.Stringer("lsn", p.st.ConfirmedFlush), zap.Stringer("recorded_lsn", rec),
				zap.Uint64("behind_bytes", uint64(rec-p.st.ConfirmedFlush)), zap.Bool("synced", p.st.Synced))
		}
	}
	return nil
}

// missingSlot handles a slot that does not exist: created when it is new
// (History has no record of it) and cfg.Create allows; a slot walrelay
// streamed from is never created again without RecreateMissingSlot.
func (p *prep) missingSlot(ctx context.Context, wantFailover bool) error {
	cfg := p.cfg
	if cfg.History != nil && p.st.SystemID != "" {
		rec, at, found, err := cfg.History.LastConfirmed(ctx, p.st.SystemID, p.db, cfg.Slot)
		if err != nil {
			return p.waitForRecovery(ctx, err)
		}
		// N.B. a recovery that has begun creates the slot itself: it is
		// waited for, neither reported gone nor raced.
		if found && !p.dryRun {
			if err := p.waitForRecovery(ctx, nil); err != nil {
				return err
			}
		}
		// N.B. the one decision this protects: a slot created now starts
		// at the server's current WAL position, so every event committed
		// since the slot's last confirmed position would be skipped
		// without a trace.
		if found && !cfg.RecreateMissingSlot {
			return &slotGoneError{msg: fmt.Sprintf("replication slot gone: slot %q of database %q on system %s was last confirmed at %s (recorded %s) and no longer exists: it was dropped, or the server was failed over to a standby without a synchronized failover slot (PostgreSQL 17+, see docs/failover.md). walrelay does not create it again: that would skip the events committed since %s. Either point walrelay at the server that still has the slot (or a promoted standby with the synchronized slot), or start once with --recreate-missing-slot to create a new slot and accept the gap",
				cfg.Slot, p.db, p.st.SystemID, rec, at.UTC().Format(time.RFC3339), rec)}
		}
		if found && p.dryRun {
			p.st.Created = true
			return nil
		}
		if found {
			p.log.Error("replication slot gone: creating it again as --recreate-missing-slot asks; events committed since the recorded position are NOT relayed",
				zap.String("slot", cfg.Slot), zap.String("system_identifier", p.st.SystemID), zap.Stringer("recorded_lsn", rec))
			if err := p.createSlot(ctx, wantFailover); err != nil {
				return err
			}
			p.log.Error("gap: events committed between these positions were not relayed",
				zap.String("slot", cfg.Slot), zap.Stringer("recorded_lsn", rec), zap.Stringer("lsn", p.st.ConfirmedFlush))
			return nil
		}
	}
	if !cfg.Create {
		return setupErrorf("replication slot %q does not exist: run %s; or start with --create", cfg.Slot, CreateSlotSQL(cfg.Slot, wantFailover))
	}
	if p.dryRun {
		p.st.Created = true
		return nil
	}
	return p.createSlot(ctx, wantFailover)
}

// CreateSlotSQL is the statement that creates slot, a failover slot when
// failover is set (PostgreSQL 17+).
func CreateSlotSQL(slot string, failover bool) string {
	if failover {
		return fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, false, true);", quoteLiteral(slot))
	}
	return fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput');", quoteLiteral(slot))
}

func (p *prep) createSlot(ctx context.Context, failover bool) error {
	// N.B. pg_create_logical_replication_slot(name, plugin, temporary,
	// twophase, failover) on 17+: a failover slot is synchronized to the
	// standbys that set sync_replication_slots.
	query := `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`
	if failover {
		query = `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`
	}
	var lsn pglogrepl.LSN
	if err := p.conn.QueryRow(ctx, query, p.cfg.Slot).Scan(&lsn); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created concurrently
			return p.prepareSlot(ctx)
		}
		return fmt.Errorf("create replication slot: %w", err)
	}
	p.log.Info("created replication slot", zap.String("slot", p.cfg.Slot), zap.Stringer("lsn", lsn), zap.Bool("failover", failover))
	p.st.ConfirmedFlush, p.st.Created, p.st.WALStatus, p.st.Exists, p.st.Failover = lsn, true, "reserved", true, failover
	return nil
}
