package pgcatalog

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgoutput"
	"github.com/walrelay/walrelay/replication"
)

// CommitTimeColumn names pg_xact_commit_timestamp(xmin) as a RowSelection
// column: the commit time PostgreSQL keeps with track_commit_timestamp.
const CommitTimeColumn = "commit-time"

// RowSelection says which outbox rows a SnapshotReader reads and in what
// order.
type RowSelection struct {
	// Since selects the rows whose SinceColumn is at or after it (or
	// NULL); zero: every row.
	Since time.Time
	// Column is the timestamp column that selects and orders the rows;
	// CommitTimeColumn: pg_xact_commit_timestamp(xmin).
	Column string
	// CommitTime orders by pg_xact_commit_timestamp(xmin) first, Column
	// breaking ties (set when track_commit_timestamp is on).
	CommitTime bool
}

// SnapshotReader reads outbox rows in an exported snapshot
// (SnapshotSlot): one REPEATABLE READ transaction that imported it.
type SnapshotReader struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// OpenSnapshot begins a read-only REPEATABLE READ transaction in snapshot
// (none when ""; for the checks before a slot is created).
//
// N.B. the session prints values as the walsender does for the stream
// (replication's output styles): a recovered row's text is what pgoutput
// would have sent, and decodes to the same record.
func OpenSnapshot(ctx context.Context, connString, snapshot string) (*SnapshotReader, error) {
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	r := &SnapshotReader{conn: conn}
	for _, set := range []string{`SET DateStyle = 'ISO, MDY'`, `SET IntervalStyle = postgres`, `SET bytea_output = hex`} {
		if _, err := conn.Exec(ctx, set); err != nil {
			r.Close(ctx)
			return nil, fmt.Errorf("set output style: %w", err)
		}
	}
	if r.tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("begin snapshot transaction: %w", err)
	}
	if snapshot == "" {
		return r, nil
	}
	if _, err := r.tx.Exec(ctx, `SET TRANSACTION SNAPSHOT `+quoteLiteral(snapshot)); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("import snapshot %s: %w", snapshot, err)
	}
	return r, nil
}

// Close ends the transaction and the connection.
func (r *SnapshotReader) Close(ctx context.Context) {
	if r.tx != nil {
		_ = r.tx.Rollback(context.WithoutCancel(ctx))
	}
	r.conn.Close(context.WithoutCancel(ctx))
}

// TrackCommitTimestamp reports whether track_commit_timestamp is on.
func (r *SnapshotReader) TrackCommitTimestamp(ctx context.Context) (bool, error) {
	var on string
	if err := r.tx.QueryRow(ctx, `SHOW track_commit_timestamp`).Scan(&on); err != nil {
		return false, fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	return on == "on", nil
}

// Relation describes table as pgoutput would (its columns in order,
// generated ones left out), and checks that column, unless empty or
// CommitTimeColumn, is a timestamp column that can select and order rows.
func (r *SnapshotReader) Relation(ctx context.Context, table, column string) (pgoutput.Relation, error) {
	rows, err := r.tx.Query(ctx, `SELECT c.oid, n.nspname, c.relname, a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
		WHERE c.oid = to_regclass($1) ORDER BY a.attnum`, quoteTable(table))
	if err != nil {
		return pgoutput.Relation{}, fmt.Errorf("read columns of %s: %w", table, err)
	}
	defer rows.Close()
	var rel pgoutput.Relation
	colType := ""
	for rows.Next() {
		var c pgoutput.Column
		var typ string
		if err := rows.Scan(&rel.ID, &rel.Namespace, &rel.Name, &c.Name, &c.TypeOID, &c.TypeMod, &typ); err != nil {
			return rel, fmt.Errorf("read columns of %s: %w", table, err)
		}
		if c.Name == column {
			colType = typ
		}
		rel.Columns = append(rel.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return rel, fmt.Errorf("read columns of %s: %w", table, err)
	}
	if len(rel.Columns) == 0 {
		return rel, setupErrorf("outbox table %s does not exist here: fix --table", table)
	}
	if column == "" || column == CommitTimeColumn {
		return rel, nil
	}
	switch {
	case colType == "":
		return rel, setupErrorf("--recover-column %s: table %s has no such column: name a timestamp column the application sets when it inserts a row (created_at timestamptz NOT NULL DEFAULT now()), or --recover-column %s with track_commit_timestamp = on", column, table, CommitTimeColumn)
	case !strings.HasPrefix(colType, "timestamp"):
		return rel, setupErrorf("--recover-column %s: column of %s is %s, which says nothing of when a row was committed: name a timestamp column set at insert (ALTER TABLE %s ADD COLUMN created_at timestamptz NOT NULL DEFAULT now()), or set track_commit_timestamp = on and use --recover-column %s", column, table, colType, quoteTable(table), CommitTimeColumn)
	}
	return rel, nil
}

// Rows reads the rows of rel that sel selects, in sel's order, handing each
// one's values (text as pgoutput sends it, nil for NULL; valid during the
// call) and its ordering time (zero when NULL) to each.
func (r *SnapshotReader) Rows(ctx context.Context, table string, rel pgoutput.Relation, sel RowSelection, each func(vals [][]byte, at time.Time) error) (int, error) {
	cols := make([]string, len(rel.Columns))
	for i, c := range rel.Columns {
		cols[i] = quoteIdent(c.Name)
	}
	commitTS := `pg_xact_commit_timestamp(xmin)`
	selCol := commitTS
	if sel.Column != "" && sel.Column != CommitTimeColumn {
		selCol = quoteIdent(sel.Column) + `::timestamptz`
	}
	order := selCol
	if sel.CommitTime && selCol != commitTS {
		order = commitTS + ` NULLS FIRST, ` + selCol
	}
	// N.B. the rows of one transaction share a commit time (and now()):
	// the transaction (xmin) and then the command that inserted each row
	// (cmin) break the tie, in the order the transaction inserted them.
	// Physical order (ctid) is not that order: a transaction whose page
	// fills gets one from the free space map, which may be an earlier
	// page. ctid orders only the rows of one command (a multi-row INSERT,
	// a COPY), where it is the insertion order but for such a page.
	q := `SELECT ` + strings.Join(cols, ", ") + `, (extract(epoch FROM ` + selCol + `) * 1000000)::bigint FROM ` + quoteTable(table)
	var args []any
	if !sel.Since.IsZero() {
		q += ` WHERE ` + selCol + ` IS NULL OR ` + selCol + ` >= $1`
		args = append(args, sel.Since)
	}
	q += ` ORDER BY ` + order + ` NULLS FIRST, xmin::text::bigint, cmin::text::bigint, tableoid, ctid`
	rows, err := r.tx.Query(ctx, q, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("read outbox %s: %w", table, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(cols)+1 {
			return n, fmt.Errorf("read outbox %s: %d values, want %d", table, len(raw), len(cols)+1)
		}
		var at time.Time
		if last := raw[len(cols)]; last != nil {
			us, err := strconv.ParseInt(string(last), 10, 64)
			if err != nil {
				return n, fmt.Errorf("read outbox %s: ordering time %q: %w", table, last, err)
			}
			at = time.UnixMicro(us).UTC()
		}
		if err := each(raw[:len(cols)], at); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("read outbox %s: %w", table, err)
	}
	return n, nil
}

// Deletes is what this server counted of rows deleted from table (its
// partitions included) since its statistics began: pg_stat_user_tables'
// n_tup_del, and the time the database's statistics were reset (zero when
// never). A failed primary's deletes are not in it.
func (r *SnapshotReader) Deletes(ctx context.Context, table string) (int64, time.Time, error) {
	var n int64
	var reset *time.Time
	err := r.tx.QueryRow(ctx, `SELECT coalesce(sum(s.n_tup_del), 0)::bigint,
			(SELECT stats_reset FROM pg_stat_database WHERE datname = current_database())
		FROM pg_stat_user_tables s
		WHERE s.relid = to_regclass($1) OR s.relid IN (SELECT relid FROM pg_partition_tree(to_regclass($1)))`, quoteTable(table)).Scan(&n, &reset)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("read deletes of %s: %w", table, err)
	}
	if reset == nil {
		return n, time.Time{}, nil
	}
	return n, *reset, nil
}
