package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// StandbySlot is the slot as a physical standby has it (PostgreSQL 17+,
// sync_replication_slots).
type StandbySlot struct {
	Exists, Synced, Temporary bool
	// Invalidation is invalidation_reason: empty when valid.
	Invalidation string
	Confirmed    pglogrepl.LSN
	// Settings are the standby's slot synchronization settings.
	SyncSlots, HotStandbyFeedback, PrimarySlot string
	InRecovery                                 bool
}

// QueryStandbySlot reads slot on the standby at standbyURL.
func QueryStandbySlot(ctx context.Context, standbyURL, slot string) (StandbySlot, error) {
	var ss StandbySlot
	conn, err := replication.ConnectSQL(ctx, standbyURL)
	if err != nil {
		return ss, fmt.Errorf("connect to standby: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return queryStandbySlot(ctx, conn, slot)
}

// queryStandbySlot reads slot on the standby conn is connected to.
func queryStandbySlot(ctx context.Context, conn *pgx.Conn, slot string) (StandbySlot, error) {
	var ss StandbySlot
	var num int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, pg_is_in_recovery(),
		current_setting('hot_standby_feedback'), current_setting('primary_slot_name')`).Scan(&num, &ss.InRecovery, &ss.HotStandbyFeedback, &ss.PrimarySlot); err != nil {
		return ss, fmt.Errorf("read standby settings: %w", err)
	}
	if num < failoverVersionNum {
		return ss, setupErrorf("the standby runs PostgreSQL %d, which has no failover slots (17+): a failover loses the slot", num/10000)
	}
	if err := conn.QueryRow(ctx, `SELECT current_setting('sync_replication_slots')`).Scan(&ss.SyncSlots); err != nil {
		return ss, fmt.Errorf("read standby settings: %w", err)
	}
	var confirmed, reason *string
	err := conn.QueryRow(ctx, `SELECT synced, temporary, invalidation_reason, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&ss.Synced, &ss.Temporary, &reason, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return ss, nil
	}
	if err != nil {
		return ss, fmt.Errorf("read standby slot: %w", err)
	}
	ss.Exists = true
	ss.Invalidation = deref(reason)
	if confirmed != nil {
		ss.Confirmed, _ = pglogrepl.ParseLSN(*confirmed)
	}
	return ss, nil
}

// Problems says what keeps the standby's copy of the slot from serving
// after a promotion; none when it would serve.
func (ss StandbySlot) Problems(slot string) []string {
	var out []string
	if !ss.InRecovery {
		out = append(out, "the server is not a standby (pg_is_in_recovery() is false)")
	}
	if ss.SyncSlots != "on" {
		out = append(out, "sync_replication_slots is off: set it on the standby (with hot_standby_feedback = on, primary_slot_name, and dbname in primary_conninfo)")
	}
	if ss.HotStandbyFeedback != "on" {
		out = append(out, "hot_standby_feedback is off on the standby: slot synchronization needs it")
	}
	if ss.PrimarySlot == "" {
		out = append(out, "primary_slot_name is empty on the standby: slot synchronization needs a physical slot on the primary")
	}
	switch {
	case !ss.Exists:
		out = append(out, fmt.Sprintf("slot %q does not exist on the standby: it is not a failover slot, or not synchronized yet", slot))
	case !ss.Synced:
		out = append(out, fmt.Sprintf("slot %q on the standby is not synced from the primary (synced = false)", slot))
	case ss.Temporary:
		out = append(out, fmt.Sprintf("slot %q on the standby is temporary: not yet ready to be used after a promotion (the standby has not caught up with it)", slot))
	}
	if ss.Invalidation != "" {
		out = append(out, fmt.Sprintf("slot %q on the standby is invalidated (%s)", slot, ss.Invalidation))
	}
	return out
}
