package inbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultTable is the processed-messages table when Config.Table is empty.
const DefaultTable = "inbox_processed"

// DB is what the table helpers need: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// DDL returns the statements that create the processed-messages table
// named table (optionally schema-qualified, "app.inbox"; "" is
// DefaultTable) and its retention index, if they do not exist:
//
//	CREATE TABLE IF NOT EXISTS inbox_processed (
//	  consumer     text        NOT NULL, -- the consumer group (Config.Group)
//	  id           text        NOT NULL, -- the message id: walrelay's "id" header
//	  processed_at timestamptz NOT NULL DEFAULT now(),
//	  PRIMARY KEY (consumer, id)
//	);
//	CREATE INDEX IF NOT EXISTS inbox_processed_processed_at ON inbox_processed (processed_at);
//
// The consumer column lets several consumer groups (several services, or
// several projections of one service) share the table: each handles every
// id once. The table must live in the database the Handler writes to, so
// that an id and its effect commit together.
func DDL(table string) string {
	ident, name := tableIdent(table)
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
  consumer     text        NOT NULL,
  id           text        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, id)
);
CREATE INDEX IF NOT EXISTS %s ON %s (processed_at);`, ident, pgx.Identifier{name + "_processed_at"}.Sanitize(), ident)
}

// CreateTable runs DDL(table) on db.
func CreateTable(ctx context.Context, db DB, table string) error {
	if _, err := db.Exec(ctx, DDL(table)); err != nil {
		return fmt.Errorf("create inbox table: %w", err)
	}
	return nil
}

// DeleteBefore deletes the ids processed before before from table ("" is
// DefaultTable), in batches of 10,000 rows so that no statement holds many
// locks, and returns how many it deleted.
//
// N.B. an id deleted here is no longer recognised as a duplicate: keep ids
// longer than any record can be delivered again — at least the retention
// of the consumed topics, or the age of the oldest committed offset a
// consumer group can rewind to.
func DeleteBefore(ctx context.Context, db DB, table string, before time.Time) (int64, error) {
	ident, _ := tableIdent(table)
	q := `DELETE FROM ` + ident + ` WHERE ctid IN (SELECT ctid FROM ` + ident + ` WHERE processed_at < $1 LIMIT 10000)`
	var total int64
	for {
		tag, err := db.Exec(ctx, q, before)
		if err != nil {
			return total, fmt.Errorf("delete processed ids: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 10000 {
			return total, nil
		}
	}
}

// tableIdent returns the quoted (schema-qualified) name of table and its
// unqualified name.
func tableIdent(table string) (ident, name string) {
	if table == "" {
		table = DefaultTable
	}
	parts := strings.Split(table, ".")
	return pgx.Identifier(parts).Sanitize(), parts[len(parts)-1]
}
