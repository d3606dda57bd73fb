package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// SlotStatus is a slot's row of pg_replication_slots with the server's WAL
// position.
type SlotStatus struct {
	Exists      bool
	Active      bool
	WALStatus   string
	LagBytes    int64 // pg_current_wal_lsn() - confirmed_flush_lsn
	SafeWALSize *int64
	Confirmed   pglogrepl.LSN
	// ServerVersion is server_version_num. Failover, Synced and
	// StandbySlots (synchronized_standby_slots) are read on 17+ only.
	ServerVersion    int
	Failover, Synced bool
	StandbySlots     string
}

// QuerySlot reads a slot's status through a normal connection.
func QuerySlot(ctx context.Context, conn *pgx.Conn, slot string) (SlotStatus, error) {
	var st SlotStatus
	var walStatus *string
	var lag *int64
	var confirmed *string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&st.ServerVersion); err != nil {
		return st, fmt.Errorf("read server version: %w", err)
	}
	cols := `false, false, ''`
	if st.ServerVersion >= failoverVersionNum {
		cols = `failover, synced, current_setting('synchronized_standby_slots')`
	}
	err := conn.QueryRow(ctx, `SELECT active, wal_status, (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, safe_wal_size, confirmed_flush_lsn::text, `+cols+`
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&st.Active, &walStatus, &lag, &st.SafeWALSize, &confirmed, &st.Failover, &st.Synced, &st.StandbySlots)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read slot %s: %w", slot, err)
	}
	st.Exists = true
	st.WALStatus = deref(walStatus)
	if lag != nil {
		st.LagBytes = *lag
	}
	if confirmed != nil {
		st.Confirmed, _ = pglogrepl.ParseLSN(*confirmed)
	}
	return st, nil
}

// SlotReader reads one slot's status (QuerySlot) over a connection of its
// own, opened at first use and again after a failed read. Use it from one
// goroutine.
type SlotReader struct {
	connString, slot string
	conn             *pgx.Conn
}

// NewSlotReader returns a SlotReader of slot on the server of connString;
// Close it.
func NewSlotReader(connString, slot string) *SlotReader {
	return &SlotReader{connString: connString, slot: slot}
}

// Read returns the slot's status. After an error the connection is closed,
// to be opened again at the next Read.
func (r *SlotReader) Read(ctx context.Context) (SlotStatus, error) {
	if r.conn == nil {
		conn, err := replication.ConnectSQL(ctx, r.connString)
		if err != nil {
			return SlotStatus{}, fmt.Errorf("connect to postgresql: %w", err)
		}
		r.conn = conn
	}
	st, err := QuerySlot(ctx, r.conn, r.slot)
	if err != nil {
		r.Close()
	}
	return st, err
}

// Close closes the connection, if open.
func (r *SlotReader) Close() {
	if r.conn != nil {
		r.conn.Close(context.Background())
		r.conn = nil
	}
}
