package pgcatalog

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// ResolvedType is a type that is not built in (a domain, an enum, citext)
// and the built-in type its values are written in. pgoutput sends a
// column's own type OID; the decoder, which does no I/O, reads the column
// as Base (decode.Types).
type ResolvedType struct {
	OID  uint32
	Name string // format_type of OID
	// Base is the built-in type its values are read as: a domain's base
	// type, through domains over domains; text (25) for an enum or
	// citext. BaseName is its name, for messages.
	Base     uint32
	BaseName string
	// Enum: the type is an enum or a domain over one; Labels are its
	// labels in their sort order.
	Enum   bool
	Labels []string
}

// oidText is text's type OID.
const oidText = 25

// ResolveTypes returns every domain, enum and citext type of the database
// that resolves to a built-in type: each domain to its base type (through
// domains over domains), each enum and citext to text. A domain over
// another type that is not built in (hstore, a composite type) is left
// out, so that a column of it is refused by its flag's type check.
//
// N.B. all of them, not only the outbox columns' types: a column retyped
// to an existing domain while walrelay streams is then read too.
func (c *ColumnCatalog) ResolveTypes(ctx context.Context) (map[uint32]ResolvedType, error) {
	// N.B. FirstNormalObjectId (16384): types below are initdb's, built
	// in; citext is an extension's base type, found by name.
	rows, err := c.conn.Query(ctx, `WITH RECURSIVE chain AS (
			SELECT t.oid AS root, t.oid AS cur, 0 AS depth FROM pg_type t
			WHERE t.oid >= 16384 AND (t.typtype IN ('d', 'e') OR (t.typtype = 'b' AND t.typname = 'citext'))
			UNION ALL
			SELECT chain.root, t.typbasetype, chain.depth + 1 FROM chain JOIN pg_type t ON t.oid = chain.cur
			WHERE t.typtype = 'd' AND chain.depth < 64)
		SELECT DISTINCT ON (chain.root) chain.root, format_type(chain.root, NULL), b.oid, format_type(b.oid, NULL),
			b.typtype::text, b.typname::text,
			coalesce((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = b.oid), '{}')
		FROM chain JOIN pg_type b ON b.oid = chain.cur
		ORDER BY chain.root, chain.depth DESC`)
	if err != nil {
		return nil, fmt.Errorf("resolve domain, enum and citext types: %w", err)
	}
	out := make(map[uint32]ResolvedType)
	var t ResolvedType
	var typtype, typname string
	_, err = pgx.ForEachRow(rows, []any{&t.OID, &t.Name, &t.Base, &t.BaseName, &typtype, &typname, &t.Labels}, func() error {
		r := t
		r.Labels = append([]string(nil), t.Labels...)
		switch {
		case typtype == "e":
			r.Base, r.Enum = oidText, true
		case typtype == "b" && typname == "citext":
			r.Base, r.Labels = oidText, nil
		case r.Base < 16384:
		default:
			return nil // a domain over a type that is not built in
		}
		out[r.OID] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resolve domain, enum and citext types: %w", err)
	}
	return out, nil
}

// Describe says what the type is, for a message: "event_id (a domain
// over uuid)", "aggregate_kind (an enum, read as its label)", "citext
// (read as text)".
func (t ResolvedType) Describe() string {
	over := ""
	if t.Name != t.BaseName {
		over = "a domain over "
	}
	switch {
	case t.Enum && over == "":
		return t.Name + " (an enum, read as its label)"
	case t.Enum:
		return fmt.Sprintf("%s (a domain over the enum %s, read as its label)", t.Name, t.BaseName)
	case t.Base == oidText && t.BaseName == "citext":
		return fmt.Sprintf("%s (%scitext, read as text)", t.Name, over)
	}
	return fmt.Sprintf("%s (a domain over %s)", t.Name, t.BaseName)
}

// Position is the server's WAL position now (the insert position on a
// primary, the replay position on a standby): read before the columns, it
// is a position every transaction committing before which the column check
// has seen.
func (c *ColumnCatalog) Position(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	err := c.conn.QueryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text`).Scan(&s)
	if err != nil {
		return 0, fmt.Errorf("read wal position: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("read wal position: %w", err)
	}
	return lsn, nil
}
