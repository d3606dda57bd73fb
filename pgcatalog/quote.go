package pgcatalog

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// quoteLiteral is s as an SQL string literal (standard_conforming_strings):
// the one in walrelay.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// quoteIdent is name as an SQL identifier, always quoted: the one in
// walrelay.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// splitTable splits a configured table name as decode does
// (pgoutput.SplitTable). A name it refuses (decode.Config.Validate reports
// it) is kept whole as a table of public, which names no table.
func splitTable(t string) (schema, table string) {
	s, n, err := pgoutput.SplitTable(t)
	if err != nil {
		return "public", t
	}
	return s, n
}

// quoteTables quotes each of tables (quoteTable).
func quoteTables(tables []string) []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = quoteTable(t)
	}
	return out
}

// quoteTable is a configured table name as a schema-qualified identifier.
func quoteTable(t string) string {
	s, n := splitTable(t)
	return pgx.Identifier{s, n}.Sanitize()
}

// QuoteIdent is quoteIdent for the fixes other packages print.
func QuoteIdent(name string) string { return quoteIdent(name) }
