package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/replication"
)

// Why a fresh failover slot is not at once synchronizable (PostgreSQL 17,
// src/backend/replication/logical/slotsync.c):
//
//   - The standby's slot sync worker creates its copy as a temporary slot
//     whose catalog_xmin is the standby's own oldest safe decoding xid
//     (GetOldestSafeDecodingTransactionId: in recovery, the next xid the
//     standby knows of), and persists it (sync-ready, temporary = false)
//     only once the primary's slot has a catalog_xmin and restart_lsn no
//     older than its own ("could not synchronize replication slot ...
//     Synchronization could lead to data loss, because the remote slot
//     needs ... catalog xmin N, but the standby has ... catalog xmin M").
//   - The primary's slot moves its catalog_xmin only when its walsender
//     decodes a running-transactions record (snapbuild.c,
//     SnapBuildProcessRunningXacts -> LogicalIncreaseXminForSlot: the
//     record's oldest running xid becomes a candidate, one at a time) and
//     the client then confirms past that record (logical.c,
//     LogicalConfirmReceivedLocation). The bgwriter logs such a record at
//     most every 15 s (LOG_SNAPSHOT_INTERVAL_MS); pg_log_standby_snapshot()
//     (standby.c, LogStandbySnapshot) logs one at once.
//   - The worker naps between cycles, doubling the nap from 200 ms to 30 s
//     while no slot changed (wait_for_slot_activity); a reload signal sets
//     its latch and starts a cycle at once.
//
// So walrelay logs a running-transactions record once the standby has a
// temporary copy, confirms past it (any idle keepalive's WAL end does), and
// wakes the worker: its next cycle finds the primary's catalog_xmin past
// its own and persists the copy.

// SyncNudge keeps a standby's copy of a failover slot synchronizable: it
// reads the copy on the standby, logs running-transactions records on the
// primary and wakes the standby's slot sync worker, each over a connection
// of its own opened at first use and again after an error. Use it from one
// goroutine.
type SyncNudge struct {
	primaryURL, standbyURL, slot string
	primary, standby             *pgx.Conn
}

// NewSyncNudge returns a SyncNudge of slot on the primary of primaryURL and
// the standby of standbyURL ("": none, Standby and Wake then fail); Close it.
func NewSyncNudge(primaryURL, standbyURL, slot string) *SyncNudge {
	return &SyncNudge{primaryURL: primaryURL, standbyURL: standbyURL, slot: slot}
}

// ErrNoPrivilege says that the role may not call a function (SQLSTATE
// 42501): the caller says which GRANT fixes it.
var ErrNoPrivilege = errors.New("permission denied")

// LogSnapshot writes a running-transactions record on the primary
// (pg_log_standby_snapshot()) and returns its LSN.
func (n *SyncNudge) LogSnapshot(ctx context.Context) (pglogrepl.LSN, error) {
	conn, err := n.open(ctx, &n.primary, n.primaryURL)
	if err != nil {
		return 0, err
	}
	var lsn pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT pg_log_standby_snapshot()::text`).Scan(&lsn); err != nil {
		n.drop(&n.primary)
		return 0, privilege(fmt.Errorf("log a standby snapshot: %w", err))
	}
	return lsn, nil
}

// Standby reads the slot's copy on the standby.
func (n *SyncNudge) Standby(ctx context.Context) (StandbySlot, error) {
	conn, err := n.open(ctx, &n.standby, n.standbyURL)
	if err != nil {
		return StandbySlot{}, err
	}
	ss, err := queryStandbySlot(ctx, conn, n.slot)
	if err != nil {
		n.drop(&n.standby)
	}
	return ss, err
}

// Wake sets the latch of the standby's slot sync worker (pg_reload_conf()
// on the standby: the worker re-reads its unchanged settings and runs a
// cycle at once instead of finishing a nap of up to 30 s).
func (n *SyncNudge) Wake(ctx context.Context) error {
	conn, err := n.open(ctx, &n.standby, n.standbyURL)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		n.drop(&n.standby)
		return privilege(fmt.Errorf("wake the standby's slot sync worker: %w", err))
	}
	return nil
}

// Close closes the connections.
func (n *SyncNudge) Close() {
	n.drop(&n.primary)
	n.drop(&n.standby)
}

func (n *SyncNudge) open(ctx context.Context, c **pgx.Conn, url string) (*pgx.Conn, error) {
	if *c != nil {
		return *c, nil
	}
	if url == "" {
		return nil, errors.New("no connection string")
	}
	conn, err := replication.ConnectSQL(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	*c = conn
	return conn, nil
}

func (n *SyncNudge) drop(c **pgx.Conn) {
	if *c != nil {
		(*c).Close(context.Background())
		*c = nil
	}
}

// privilege marks err with ErrNoPrivilege when PostgreSQL refused it for
// lack of privilege.
func privilege(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("%w: %w", ErrNoPrivilege, err)
	}
	return err
}

// Ready says whether the copy would serve after a promotion: on a server
// still in recovery, synchronized, persistent (not temporary) and valid.
//
// N.B. a promoted standby keeps its copy with synced = true: it serves this
// failover, never the next one.
func (ss StandbySlot) Ready() bool {
	return ss.InRecovery && ss.Exists && ss.Synced && !ss.Temporary && ss.Invalidation == ""
}
