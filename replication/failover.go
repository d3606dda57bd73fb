package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FailoverMode says whether the slot is a failover slot (PostgreSQL 17+:
// synchronized to a physical standby with sync_replication_slots, so that a
// promotion keeps it).
type FailoverMode string

const (
	// FailoverAuto is the default: a failover slot on 17 and newer, an
	// ordinary one on older servers (which have no failover slots).
	FailoverAuto FailoverMode = ""
	// FailoverOn asks for a failover slot; a server older than 17 is refused.
	FailoverOn FailoverMode = "on"
	// FailoverOff keeps (and creates) an ordinary slot.
	FailoverOff FailoverMode = "off"
)

// failoverVersionNum is the first server_version_num with failover slots.
const failoverVersionNum = 170000

// wantFailover says whether the slot must be a failover slot on a server of
// version num, or why the configuration cannot be served there.
func (m FailoverMode) want(num int) (bool, error) {
	switch {
	case m == FailoverOff:
		return false, nil
	case num >= failoverVersionNum:
		return true, nil
	case m == FailoverOn:
		return false, setupErrorf("--slot-failover is set, but PostgreSQL %d has no failover slots (they are PostgreSQL 17+): upgrade the server, or drop --slot-failover and accept that a failover to a standby loses the slot (walrelay then stops with exit code 3)", num/10000)
	}
	return false, nil
}

// History is where walrelay remembers the slots it has streamed from, so that
// a slot that disappeared is never taken for a new one. The pipeline keeps it
// (a marker record on a compacted Kafka topic); Prepare only reads it.
type History interface {
	// LastConfirmed returns the position last recorded for the slot of
	// database on the system (IDENTIFY_SYSTEM's systemid), when it was
	// recorded, and whether there is a record.
	LastConfirmed(ctx context.Context, system, database, slot string) (lsn pglogrepl.LSN, at time.Time, found bool, err error)
}

// ErrSlotGone is wrapped (with ErrSlotLost) when a slot walrelay streamed
// from no longer exists.
var ErrSlotGone = errors.New("replication slot gone")

type slotGoneError struct{ msg string }

func (e *slotGoneError) Error() string { return e.msg }
func (e *slotGoneError) Is(target error) bool {
	return target == ErrSlotGone || target == ErrSlotLost
}

// ConnectReplication opens a replication connection (replication=database) of cfg,
// for the commands only it accepts (IDENTIFY_SYSTEM, ALTER_REPLICATION_SLOT).
func ConnectReplication(ctx context.Context, cfg Config) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, setupErrorf("PostgreSQL connection string: %s", redactErr(err))
	}
	pc.RuntimeParams["replication"] = "database"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "walrelay"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", err)
	}
	return conn, nil
}

// identify reads the server's system identifier with IDENTIFY_SYSTEM.
//
// N.B. the system identifier is written by initdb and copied by every
// physical standby: a promoted standby has its primary's, so what walrelay
// recorded for a slot on the primary is found again after a failover.
func identify(ctx context.Context, cfg Config) (string, error) {
	conn, err := ConnectReplication(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("identify system: %w", err)
	}
	return sys.SystemID, nil
}

// SystemID is the system identifier of the server cfg connects to, for
// History's records: IDENTIFY_SYSTEM, else pg_control_system() (for a role
// without REPLICATION, such as the one that runs walrelay setup).
func SystemID(ctx context.Context, cfg Config) (string, error) {
	sys, err := identify(ctx, cfg)
	if err == nil {
		return sys, nil
	}
	conn, cerr := pgx.Connect(ctx, cfg.ConnString)
	if cerr != nil {
		return "", errors.Join(err, cerr)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if qerr := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&sys); qerr != nil {
		return "", errors.Join(err, qerr)
	}
	return sys, nil
}

// AlterFailoverSQL is the replication command that makes slot a failover slot.
func AlterFailoverSQL(slot string) string {
	return fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER true)", pgx.Identifier{slot}.Sanitize())
}

// alterFailover makes an existing slot a failover slot over a replication
// connection.
func alterFailover(ctx context.Context, cfg Config) error {
	conn, err := ConnectReplication(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Exec(ctx, AlterFailoverSQL(cfg.Slot)).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
			return fmt.Errorf("%w: alter slot: %s", ErrSlotInUse, pgErr.Message)
		}
		return fmt.Errorf("alter replication slot: %w", err)
	}
	return nil
}

// failover is the "failover readiness" step: whether a promotion of a
// standby keeps the slot, and what to set when it does not.
func (p *prep) failover(ctx context.Context) (string, error) {
	if p.st.ServerVersion < failoverVersionNum {
		if _, err := p.cfg.SlotFailover.want(p.st.ServerVersion); err != nil {
			return "", err
		}
		return fmt.Sprintf("not protected: PostgreSQL %d has no failover slots (17+), so a failover to a standby loses the slot and walrelay stops with exit code 3 (README \"Failover\")", p.st.ServerVersion/10000), nil
	}
	var standbySlots string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('synchronized_standby_slots')`).Scan(&standbySlots); err != nil {
		return "", fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	var notes []string
	switch {
	case p.cfg.SlotFailover == FailoverOff:
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
	conn, err := pgx.Connect(ctx, standbyURL)
	if err != nil {
		return ss, fmt.Errorf("connect to standby: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
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
	err = conn.QueryRow(ctx, `SELECT synced, temporary, invalidation_reason, confirmed_flush_lsn::text
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
