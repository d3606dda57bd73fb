package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// Column is one column of an outbox table as the catalog has it.
type Column struct {
	Name string
	// OID is the column's type; Type its name with modifiers
	// (format_type).
	OID  uint32
	Type string
	// Generated is attgenerated: "" for a plain column, "s" stored, "v"
	// virtual.
	Generated string
	NotNull   bool
	// Default is the default's expression, "" for none.
	Default string
}

// ColumnCatalog reads the outbox tables' columns for the column checks
// (the pipeline's CheckColumns decides what they allow) over a connection
// of its own.
type ColumnCatalog struct {
	conn *pgx.Conn
}

// ConnectColumns opens a ColumnCatalog on the server of connString; Close it.
func ConnectColumns(ctx context.Context, connString string) (*ColumnCatalog, error) {
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	return &ColumnCatalog{conn: conn}, nil
}

// Close closes the connection.
func (c *ColumnCatalog) Close(ctx context.Context) { c.conn.Close(ctx) }

// GeneratedColumns returns server_version_num, and whether publication
// publishes stored generated columns (publish_generated_columns = stored,
// PostgreSQL 18+; false when the publication does not exist yet).
func (c *ColumnCatalog) GeneratedColumns(ctx context.Context, publication string) (version int, stored bool, err error) {
	if err := c.conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return 0, false, fmt.Errorf("read server version: %w", err)
	}
	if version >= 180000 {
		err := c.conn.QueryRow(ctx, `SELECT pubgencols = 's' FROM pg_publication WHERE pubname = $1`, publication).Scan(&stored)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, false, fmt.Errorf("read publication %s: %w", publication, err)
		}
	}
	return version, stored, nil
}

// Columns lists the columns of table t (schema.table, as configured) in
// order; none when the table does not exist.
func (c *ColumnCatalog) Columns(ctx context.Context, t, schema, table string) ([]Column, error) {
	rows, err := c.conn.Query(ctx, `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.attgenerated::text, a.attnotnull,
			CASE WHEN a.attgenerated = '' THEN coalesce(pg_get_expr(d.adbin, d.adrelid), '') ELSE '' END
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, schema, table)
	if err != nil {
		return nil, fmt.Errorf("list columns of %s: %w", t, err)
	}
	cols, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Column, error) {
		var col Column
		err := row.Scan(&col.Name, &col.OID, &col.Type, &col.Generated, &col.NotNull, &col.Default)
		return col, err
	})
	if err != nil {
		return nil, fmt.Errorf("list columns of %s: %w", t, err)
	}
	return cols, nil
}
