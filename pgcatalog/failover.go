package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/replication"
)

// failoverVersionNum is the first server_version_num with failover slots.
const failoverVersionNum = 170000

// failoverWanted says whether the slot must be a failover slot on a server of
// version num, or why the configuration cannot be served there.
func failoverWanted(m replication.FailoverMode, num int) (bool, error) {
	switch {
	case m == replication.FailoverOff:
		return false, nil
	case num >= failoverVersionNum:
		return true, nil
	case m == replication.FailoverOn:
		return false, setupErrorf("--slot-failover is set, but PostgreSQL %d has no failover slots (they are PostgreSQL 17+): upgrade the server, or drop --slot-failover and accept that a failover to a standby loses the slot (walrelay then stops with exit code 3)", num/10000)
	}
	return false, nil
}

// AlterFailoverSQL is the replication command that makes slot a failover slot.
func AlterFailoverSQL(slot string) string {
	return fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER true)", quoteIdent(slot))
}

// alterFailover makes an existing slot a failover slot over a replication
// connection.
func alterFailover(ctx context.Context, cfg replication.Config) error {
	conn, err := replication.ConnectReplication(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Exec(ctx, AlterFailoverSQL(cfg.Slot)).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
			return fmt.Errorf("%w: alter slot: %s", replication.ErrSlotInUse, pgErr.Message)
		}
		return fmt.Errorf("alter replication slot: %w", err)
	}
	return nil
}

// failover is the "failover readiness" step: whether a promotion of a
// standby keeps the slot, and what to set when it does not.
func (p *prep) failover(ctx context.Context) (string, error) {
	if p.st.ServerVersion < failoverVersionNum {
		if _, err := failoverWanted(p.cfg.SlotFailover, p.st.ServerVersion); err != nil {
			return "", err
		}
		return fmt.Sprintf("not protected: PostgreSQL %d has no failover slots (17+), so a failover to a standby loses the slot and walrelay stops with exit code 3 (docs/failover.md)", p.st.ServerVersion/10000), nil
	}
	var standbySlots string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('synchronized_standby_slots')`).Scan(&standbySlots); err != nil {
		return "", fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	var notes []string
	switch {
	case p.cfg.SlotFailover == replication.FailoverOff:
		notes = append(notes, "off (--slot-failover=false): a failover to a standby loses the slot")
	case !p.st.Exists && p.dryRun:
		notes = append(notes, "the slot will be created as a failover slot")
	case p.st.Failover:
		notes = append(notes, "failover slot")
	case p.dryRun:
		notes = append(notes, fmt.Sprintf("slot %q is not a failover slot: walrelay run makes it one before streaming (%s; only while no one streams it)", p.cfg.Slot, AlterFailoverSQL(p.cfg.Slot)))
	default:
		notes = append(notes, fmt.Sprintf("slot %q is not a failover slot and could not be made one (it is held): run %s over a replication connection when no one streams it", p.cfg.Slot, AlterFailoverSQL(p.cfg.Slot)))
	}
	if standbySlots == "" {
		notes = append(notes, "synchronized_standby_slots is empty: walrelay may receive and confirm transactions a standby has not yet received, and a failover to that standby loses them: set it to the standby's physical slot (ALTER SYSTEM SET synchronized_standby_slots = 'SLOT'; SELECT pg_reload_conf();)")
	} else {
		notes = append(notes, "synchronized_standby_slots = "+standbySlots)
	}
	return strings.Join(notes, "; "), nil
}
