package decode

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// A mapping that no longer matches its table is a configuration change,
// not a poison row. pgoutput sends an outbox's Relation message again after
// an ALTER TABLE, before the first change of the table that follows; when
// the table then lacks a column the mapping names (renamed or dropped) or
// has it with a type its flag does not take, every later row would fail
// alike. So Decode returns an error wrapping ErrSchemaChanged at that
// Relation message, naming the flag to set; the pipeline stops without
// confirming the transaction that carries it, nor anything after (exit 2).
// Only a change made since the check at start (Config.LiveFrom): a
// transaction that committed before it was written under a table or
// publication (a column list) the check has seen change since, which no
// flag matches now; its rows stay poison events, as the warning says.
// N.B. every mapped column is required: a column the configuration names
// (partition and timestamp columns too, whose NULL has a fallback) is
// never silently left out when it goes, since that would change where or
// how the events of every aggregate are written.

// ErrSchemaChanged is wrapped when an outbox table no longer matches the
// column mapping (a mapped column renamed, dropped or retyped).
var ErrSchemaChanged = errors.New("outbox table no longer matches the column mapping")

// mappingProblem is a mapped column that a relation lacks (typed false) or
// has with type oid (as sent), which its flag does not take (typed true).
type mappingProblem struct {
	column, flag string
	typed        bool
	oid          uint32
	by           string // what does not take the type, when not flag (a converter)
}

// unmappable handles outbox relation rel (from Relation message m), which
// cannot be mapped: a change made since the check at start stops the
// stream (schemaChanged); one from before it (Config.LiveFrom) makes its
// inserts poison events.
func (d *Decoder) unmappable(prev *relation, m pgoutput.Relation, rel *relation) error {
	if d.tx.InTx() && d.tx.Current().FinalLSN < d.cfg.LiveFrom {
		if renamed, ok := d.renamedSince(m, rel); ok {
			d.log.Warn("outbox table had other column names in a transaction from before walrelay started; its columns are mapped by their place",
				zap.String("table", rel.qualified), zap.Stringer("commit_lsn", d.tx.Current().FinalLSN), zap.Strings("renamed", renamed))
			return nil
		}
		d.log.Warn("outbox table cannot be mapped in a transaction from before walrelay started; its inserts are poison events",
			zap.String("table", rel.qualified), zap.Stringer("commit_lsn", d.tx.Current().FinalLSN), zap.Error(rel.err))
		return nil
	}
	return d.schemaChanged(prev, m, rel)
}

// renamedSince maps outbox relation rel (from Relation message m, of a
// transaction from before the check at start) again when each mapped
// column it lacks is, in the table's columns at that check
// (Config.Columns), in the place of a column of m whose name the table no
// longer has: a column renamed since (a rename keeps its place and the
// number of columns). It reports the renames (old->new) and whether the
// relation was mapped so.
func (d *Decoder) renamedSince(m pgoutput.Relation, rel *relation) ([]string, bool) {
	now := d.cfg.Columns[rel.qualified]
	if len(now) != len(m.Columns) || len(rel.problems) == 0 {
		return nil, false
	}
	cols := append([]pgoutput.Column(nil), m.Columns...)
	var renamed []string
	for _, p := range rel.problems {
		i := slices.Index(now, p.column)
		if p.typed || i < 0 || slices.Contains(now, cols[i].Name) {
			return nil, false
		}
		renamed = append(renamed, cols[i].Name+"->"+p.column)
		cols[i].Name = p.column
	}
	m.Columns = cols
	again := d.mapRelationAs(m, rel.qualified)
	if again.err != nil {
		return nil, false
	}
	again.leaf = rel.leaf
	d.relations[m.ID] = again
	return renamed, true
}

// schemaChanged is the error of outbox relation rel (from Relation message
// m), which cannot be mapped; prev is the relation's entry before m, if
// any, from which a rename is told.
func (d *Decoder) schemaChanged(prev *relation, m pgoutput.Relation, rel *relation) error {
	where := "outside a transaction"
	if d.tx.InTx() {
		b := d.tx.Current()
		where = fmt.Sprintf("in transaction %d (commit at %s)", b.Xid, b.FinalLSN)
	}
	names := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		names[i] = c.Name
	}
	var fixes []string
	for _, p := range rel.problems {
		fixes = append(fixes, d.fix(p, prev, m, rel, names))
	}
	if len(fixes) == 0 {
		fixes = append(fixes, rel.err.Error())
	}
	return &schemaChangeError{
		msg: fmt.Sprintf("%s: table %s changed %s: %s; walrelay stops and confirms nothing from this transaction on: set the flag, then start walrelay again",
			ErrSchemaChanged, rel.qualified, where, strings.Join(fixes, "; ")),
		reason: rel.err,
	}
}

// schemaChangeError wraps ErrSchemaChanged and the reason the relation
// cannot be mapped (ErrMissingColumn, ErrUnsupportedType).
type schemaChangeError struct {
	msg    string
	reason error
}

func (e *schemaChangeError) Error() string   { return e.msg }
func (e *schemaChangeError) Unwrap() []error { return []error{ErrSchemaChanged, e.reason} }

// fix says what happened to the column of p and which flag to set.
func (d *Decoder) fix(p mappingProblem, prev *relation, m pgoutput.Relation, rel *relation, names []string) string {
	if p.typed {
		by := p.by
		if by == "" {
			by = p.flag
		}
		s := fmt.Sprintf("column %q (%s) has type %s, which %s does not take", p.column, p.flag, d.typeLabel(p.oid), by)
		switch {
		case p.oid >= firstNormalOID && !d.known(p.oid):
			return s + " (a type created or changed after walrelay started; walrelay resolves domains, enums and citext at start): start walrelay again"
		case prev != nil && prev.err == nil:
			if i := prev.index(p.column); i >= 0 {
				return s + fmt.Sprintf(": change it back (ALTER TABLE %s ALTER COLUMN %s TYPE %s) or name another column with %s",
					rel.qualified, quoteIdent(p.column), d.typeLabel(prev.sentType(i)), p.flag)
			}
		}
		return s + ": name a column of a type it takes with " + p.flag
	}
	// N.B. a rename keeps the column's position and the number of columns:
	// the column in its place is the new name when the old relation had
	// no column of that name.
	if prev != nil && len(prev.columns) == len(m.Columns) {
		if i := prev.index(p.column); i >= 0 {
			if n := m.Columns[i].Name; prev.index(n) < 0 {
				return fmt.Sprintf("column %q (%s) was renamed to %q: set %s", p.column, p.flag, n, d.flagWith(p, n))
			}
		}
	}
	return fmt.Sprintf("table %s has no column %q (%s) any more (dropped or renamed); its columns are %s: set %s to the column that holds it now, or add it back (ALTER TABLE %s ADD COLUMN %s ...)",
		rel.qualified, p.column, p.flag, strings.Join(names, ", "), p.flag, rel.qualified, quoteIdent(p.column))
}

// known reports whether type oid was resolved at start (Config.Types).
func (d *Decoder) known(oid uint32) bool {
	_, ok := d.cfg.Types[oid]
	return ok
}

// flagWith is the flag of p as it reads with column name in place of
// p.column, as typed on a command line.
func (d *Decoder) flagWith(p mappingProblem, name string) string {
	switch p.flag {
	case "--topic":
		return "--topic '" + strings.ReplaceAll(d.template.String(), "${"+p.column+"}", "${"+name+"}") + "'"
	case "--header-columns":
		var l []string
		for _, h := range d.cfg.HeaderColumns {
			l = append(l, replaceColumn(h.Column, p.column, name)+":"+h.Header)
		}
		return "--header-columns " + strings.Join(l, ",")
	case "--envelope-columns":
		var l []string
		for _, f := range d.cfg.EnvelopeFields {
			l = append(l, replaceColumn(f.Column, p.column, name)+":"+f.Alias)
		}
		return "--envelope-columns " + strings.Join(l, ",")
	}
	return p.flag + " " + name
}

func replaceColumn(col, old, name string) string {
	if col == old {
		return name
	}
	return col
}

// index is the position of column name in the relation, or -1.
func (r *relation) index(name string) int {
	return slices.IndexFunc(r.columns, func(c pgoutput.Column) bool { return c.Name == name })
}

// quoteIdent quotes a column name for the SQL of a message.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
