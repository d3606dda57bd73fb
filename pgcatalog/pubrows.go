package pgcatalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// Row filters and column lists (PostgreSQL 15+). A publication may publish
// only the rows of a table that match a WHERE clause, and only some of its
// columns. pgoutput applies both before walrelay sees anything, so neither
// shows in the stream: a row filtered out is simply absent and walrelay
// would confirm the slot past it, and a mapped column left out of the list
// is missing from every row, each of which becomes a poison event.
//
// Both are decided under the catalog of the moment a row was written: rows
// committed while a filter or a narrow list was in place stay filtered or
// narrow after the publication is fixed. The check runs at every start,
// before the slot is created, so that a fresh setup loses nothing.

// pubRel is one row of pg_publication_rel: a table listed by the
// publication, with its column list and row filter.
type pubRel struct {
	schema, table string
	inherited     bool     // a plain table with inheritance children: listed with ONLY
	columns       []string // nil: all columns
	filter        string   // "": no row filter
}

func (r pubRel) qualified() string { return r.schema + "." + r.table }

// sql renders r as an entry of ALTER PUBLICATION ... SET TABLE.
func (r pubRel) sql() string {
	var b strings.Builder
	if r.inherited {
		b.WriteString("ONLY ")
	}
	b.WriteString(pgx.Identifier{r.schema, r.table}.Sanitize())
	if r.columns != nil {
		quoted := make([]string, len(r.columns))
		for i, c := range r.columns {
			quoted[i] = quoteIdent(c)
		}
		b.WriteString(" (" + strings.Join(quoted, ", ") + ")")
	}
	if r.filter != "" {
		// N.B. pg_get_expr does not always parenthesize; WHERE needs it.
		b.WriteString(" WHERE (" + r.filter + ")")
	}
	return b.String()
}

// checkRowsAndColumns refuses a publication whose row filter or column list
// would relay part of an outbox (see above). It needs PostgreSQL 15+.
func checkRowsAndColumns(ctx context.Context, conn *pgx.Conn, cfg replication.Config, pubOID uint32) error {
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname,
			c.relkind = 'r' AND EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid),
			CASE WHEN pr.prattrs IS NOT NULL THEN ARRAY(
				SELECT a.attname::text FROM unnest(pr.prattrs::int2[]) WITH ORDINALITY AS k(attnum, ord)
				JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum ORDER BY k.ord) END,
			coalesce(pg_get_expr(pr.prqual, pr.prrelid), '')
		FROM pg_publication_rel pr
		JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE pr.prpubid = $1 ORDER BY 1, 2`, pubOID)
	if err != nil {
		return fmt.Errorf("read publication tables: %w", err)
	}
	rels, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pubRel, error) {
		var r pubRel
		err := row.Scan(&r.schema, &r.table, &r.inherited, &r.columns, &r.filter)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("read publication tables: %w", err)
	}
	rows, err = conn.Query(ctx, `SELECT n.nspname FROM pg_publication_namespace pn
		JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE pn.pnpubid = $1 ORDER BY 1`, pubOID)
	if err != nil {
		return fmt.Errorf("read publication schemas: %w", err)
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read publication schemas: %w", err)
	}

	var problems []string
	var filtered, narrowed bool
	fixed := slices.Clone(rels)
	for _, t := range cfg.Tables {
		schema, table := splitTable(t)
		i := slices.IndexFunc(rels, func(r pubRel) bool { return r.schema == schema && r.table == table })
		if i < 0 {
			continue // published through FOR TABLES IN SCHEMA: no filter, no list
		}
		r := rels[i]
		// N.B. pgoutput ignores a table's row filter when the publication
		// also publishes the table's schema (pgoutput_row_filter_init).
		if r.filter != "" && !slices.Contains(schemas, schema) {
			filtered = true
			fixed[i].filter = ""
			problems = append(problems, fmt.Sprintf("publication %q has a row filter on outbox %s (WHERE (%s)): the rows it leaves out never reach walrelay, which would confirm the slot past them; walrelay relays every row of an outbox (to split events between relays, give each an outbox table of its own)",
				cfg.Publication, r.qualified(), r.filter))
		}
		if r.columns == nil {
			continue
		}
		var missing []string
		for _, c := range cfg.Columns {
			if !slices.Contains(r.columns, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			// N.B. a column list that keeps every mapped column is
			// accepted: pgoutput then sends neither the Relation column nor
			// the value of the others, which spares wide unmapped columns.
			narrowed = true
			fixed[i].columns = append(slices.Clone(r.columns), missing...)
			problems = append(problems, fmt.Sprintf("publication %q's column list of outbox %s (%s) leaves out %s, which walrelay maps: every row would arrive without it and be a poison event",
				cfg.Publication, r.qualified(), strings.Join(r.columns, ", "), strings.Join(missing, ", ")))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	entries := make([]string, len(fixed))
	for i, r := range fixed {
		entries[i] = r.sql()
	}
	fix := "SET TABLE " + strings.Join(entries, ", ")
	if len(schemas) > 0 {
		quoted := make([]string, len(schemas))
		for i, s := range schemas {
			quoted[i] = quoteIdent(s)
		}
		// N.B. SET replaces every table and schema of the publication:
		// the schemas it publishes are named again.
		fix += ", TABLES IN SCHEMA " + strings.Join(quoted, ", ")
	}
	var after []string
	if filtered {
		after = append(after, "rows the filter left out before the fix stay left out")
	}
	if narrowed {
		after = append(after, "rows committed before the fix still lack the columns and are poison events")
	}
	return setupErrorf("%s: run ALTER PUBLICATION %s %s; (PostgreSQL decodes each row under the publication as it was when the row was committed: %s)",
		strings.Join(problems, "; "), quoteIdent(cfg.Publication), fix, strings.Join(after, "; "))
}

// VerifyPublication runs Prepare's publication check again on conn, never
// creating anything: an error wrapping ErrSetup says the publication no
// longer publishes every outbox row (a row filter added, the outbox dropped
// from it, publish_via_partition_root off, a column list narrowed).
func VerifyPublication(ctx context.Context, conn *pgx.Conn, cfg replication.Config) error {
	cfg = cfg.WithDefaults()
	cfg.Create = false
	_, err := preparePublication(ctx, conn, cfg, zap.NewNop(), true)
	return err
}
