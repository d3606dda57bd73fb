package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/replication"
)

// PartitionRoots tells which PostgreSQL partition tree a relation of the
// stream belongs to (its partition root), over a normal connection of its
// own, opened at first use. It serves the decoder's Unresolved relations: a
// Relation message of a table that is not an outbox may be a partition of
// an outbox (see decode's partition.go). Use it from one goroutine.
type PartitionRoots struct {
	connString string
	conn       *pgx.Conn
}

// NewPartitionRoots returns a PartitionRoots for cfg's server; Close it.
func NewPartitionRoots(cfg replication.Config) *PartitionRoots {
	return &PartitionRoots{connString: cfg.ConnString}
}

// Root returns the schema-qualified root of relation oid's partition tree
// ("" when it is not in one), and whether the relation still exists.
//
// N.B. the catalog read is today's, not the one the WAL was written
// under: a partition dropped since is reported as not existing.
func (r *PartitionRoots) Root(ctx context.Context, oid uint32) (root string, exists bool, err error) {
	if r.conn == nil {
		conn, err := replication.ConnectSQL(ctx, r.connString)
		if err != nil {
			return "", false, fmt.Errorf("connect to postgresql: %w", err)
		}
		r.conn = conn
	}
	err = r.conn.QueryRow(ctx, `SELECT c.oid IS NOT NULL, coalesce(rn.nspname || '.' || rc.relname, '')
		FROM (SELECT $1::oid AS oid) a
		LEFT JOIN pg_class c ON c.oid = a.oid
		LEFT JOIN pg_class rc ON rc.oid = pg_partition_root(c.oid)
		LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace`, oid).Scan(&exists, &root)
	if err != nil {
		r.Close()
		return "", false, fmt.Errorf("look up partition root of relation %d: %w", oid, err)
	}
	return root, exists, nil
}

// Close closes the connection, if open.
func (r *PartitionRoots) Close() {
	if r.conn != nil {
		r.conn.Close(context.Background())
		r.conn = nil
	}
}
