package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// SnapshotSlot is a logical slot created with its snapshot exported, on
// a replication connection held open: the snapshot can be imported
// (OpenSnapshot) until Close. Rows committed before the slot's
// consistent point are visible in the snapshot; every transaction
// committed after it is decoded from the slot.
type SnapshotSlot struct {
	conn            *pgconn.PgConn
	Slot            string
	ConsistentPoint pglogrepl.LSN
	Snapshot        string
}

// CreateSnapshotSlot creates cfg.Slot (pgoutput) exporting its snapshot.
//
// N.B. the legacy option EXPORT_SNAPSHOT, not (SNAPSHOT 'export'), which
// PostgreSQL 14 lacks; every later version accepts both. The slot is not
// a failover slot yet: walrelay run makes it one (ALTER_REPLICATION_SLOT)
// before it streams, as for any existing slot.
func CreateSnapshotSlot(ctx context.Context, cfg replication.Config, log *zap.Logger) (*SnapshotSlot, error) {
	conn, err := replication.ConnectReplication(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, quoteIdent(cfg.Slot), "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create replication slot %q exporting its snapshot: %w", cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create replication slot %q: consistent point: %w", cfg.Slot, err)
	}
	log.Info("created replication slot exporting its snapshot", zap.String("slot", cfg.Slot), zap.Stringer("lsn", lsn), zap.String("snapshot", res.SnapshotName))
	return &SnapshotSlot{conn: conn, Slot: cfg.Slot, ConsistentPoint: lsn, Snapshot: res.SnapshotName}, nil
}

// Close ends the replication connection: the snapshot can no longer be
// imported, the slot stays.
func (s *SnapshotSlot) Close(ctx context.Context) { s.conn.Close(ctx) }

// DropSlot drops slot when it exists and nobody streams it.
func (c *CommandConn) DropSlot(ctx context.Context, slot string) error {
	if _, err := c.conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot); err != nil {
		return fmt.Errorf("drop replication slot %q: %w", slot, err)
	}
	return nil
}
