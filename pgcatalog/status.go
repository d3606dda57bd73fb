package pgcatalog

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// Slot is the slot's state and lag (`walrelay status`).
func (c *CommandConn) Slot(ctx context.Context, slot string) (replication.SlotStatus, error) {
	return replication.QuerySlot(ctx, c.conn, slot)
}

// PublicationTables are the tables the publication lists, as schema.table,
// sorted; none when it is missing or empty.
func (c *CommandConn) PublicationTables(ctx context.Context, publication string) ([]string, error) {
	rows, err := c.conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, publication)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
