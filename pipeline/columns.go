package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/pgcatalog"
)

// ErrColumns is wrapped when an outbox table lacks a column the mapping or
// the topic template names, or has it with a type the flag does not take,
// or as a generated column pgoutput does not send: a setup error.
var ErrColumns = errors.New("outbox table cannot be mapped")

// MappedColumns returns each column the mapping and the topic template
// name, with the flag that names it.
func MappedColumns(dc decode.Config) (map[string]string, error) {
	return decode.MappedColumns(dc)
}

// CheckColumns verifies before streaming that each outbox table has every
// column the mapping and the topic template name, that each has a type the
// flag naming it takes (decode.CheckColumnType, the decoder's own check),
// and that pgoutput sends it (a generated column it does not send). The
// publication may not exist yet (walrelay creates it after this check).
//
// It returns what the decoder needs of the check (decode.Config.Types and
// LiveFrom).
func CheckColumns(ctx context.Context, connString, publication string, dc decode.Config) (Checked, error) {
	if dc.NoTables {
		return Checked{}, nil // the message source alone: no table to map
	}
	cat, err := pgcatalog.ConnectColumns(ctx, connString)
	if err != nil {
		return Checked{}, err
	}
	defer cat.Close(context.WithoutCancel(ctx))
	want, err := MappedColumns(dc)
	if err != nil {
		return Checked{}, err
	}
	// N.B. before the columns are read: a transaction that commits before
	// it was seen by this check (decode.Config.LiveFrom).
	at, err := cat.Position(ctx)
	if err != nil {
		return Checked{}, err
	}
	// N.B. pgoutput sends a stored generated column only from PostgreSQL
	// 18 and only with publish_generated_columns = stored; a virtual one
	// never. A mapped column it does not send makes every row poison.
	version, genStored, err := cat.GeneratedColumns(ctx, publication)
	if err != nil {
		return Checked{}, err
	}
	resolved, err := cat.ResolveTypes(ctx)
	if err != nil {
		return Checked{}, err
	}
	types := make(decode.Types, len(resolved))
	for oid, r := range resolved {
		types[oid] = decode.BaseType{OID: r.Base, Name: r.Name, Enum: r.Enum, Labels: r.Labels}
	}
	var errs []error
	current := map[string][]string{}
	for _, t := range dc.Tables {
		schema, table, _ := decode.SplitTable(t)
		cols, err := cat.Columns(ctx, t, schema, table)
		if err != nil {
			return Checked{}, err
		}
		if len(cols) == 0 {
			continue // a missing table is reported by the setup checks
		}
		have := map[string]pgcatalog.Column{}
		names := make([]string, len(cols))
		var sent []string // the columns pgoutput sends, in order
		for i, c := range cols {
			have[c.Name], names[i] = c, c.Name
			if c.Generated == "" || c.Generated == "s" && version >= 180000 && genStored {
				sent = append(sent, c.Name)
			}
		}
		current[schema+"."+table] = sent
		for _, col := range sortedKeys(want) {
			flag := want[col]
			c, ok := have[col]
			if !ok {
				errs = append(errs, fmt.Errorf("table %s has no column %q (named by %s); its columns are %s", t, col, flag, strings.Join(names, ", ")))
				continue
			}
			// N.B. a domain, an enum or citext is checked as what the
			// decoder reads it as.
			oid, typ := c.OID, c.Type
			if r, ok := resolved[c.OID]; ok {
				oid, typ = r.Base, r.Describe()
			}
			if err := decode.CheckColumnType(flag, oid); err != nil {
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s) has type %s: %w: name a column of one of those types or change its type, e.g. ALTER TABLE %s ALTER COLUMN %s TYPE %s USING %s::%s",
					t, col, flag, typ, err, t, pgcatalog.QuoteIdent(col), decode.SuggestedType(flag), pgcatalog.QuoteIdent(col), decode.SuggestedType(flag)))
			}
			if err := dc.CheckFormatType(flag, oid); err != nil {
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s) has type %s: %w", t, col, flag, typ, err))
			}
			if err := dc.CheckNullable(col, flag, c.NotNull); err != nil {
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s): %w", t, col, flag, err))
			}
			if err := dc.CheckDefault(flag, c.Default); err != nil {
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s): %w: drop it (ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT) or use another converter", t, col, flag, err, t, pgcatalog.QuoteIdent(col)))
			}
			switch {
			case c.Generated == "s" && version < 180000:
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s) is GENERATED ALWAYS ... STORED, and pgoutput sends generated columns only from PostgreSQL 18 (server_version_num %d): name a column the application writes, or make it a plain column (ALTER TABLE %s ALTER COLUMN %s DROP EXPRESSION)", t, col, flag, version, t, pgcatalog.QuoteIdent(col)))
			case c.Generated == "s" && !genStored:
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s) is GENERATED ALWAYS ... STORED, and publication %q does not publish generated columns: run ALTER PUBLICATION %s SET (publish_generated_columns = stored), or name a column the application writes", t, col, flag, publication, pgcatalog.QuoteIdent(publication)))
			case c.Generated == "v":
				errs = append(errs, fmt.Errorf("column %s.%s (named by %s) is GENERATED ALWAYS ... VIRTUAL, and pgoutput never sends virtual generated columns: name a column the application writes, or make it STORED and publish it (publish_generated_columns = stored)", t, col, flag))
			}
		}
	}
	if len(errs) > 0 {
		return Checked{}, fmt.Errorf("%w: %w", ErrColumns, errors.Join(errs...))
	}
	return Checked{Types: types, At: at, Columns: current}, nil
}

// Checked is what the decoder needs of the column check.
type Checked struct {
	// Types resolves the database's domains, enums and citext: a column of
	// one of them is checked, and read, as its base type, its label or
	// text (decode.Config.Types).
	Types decode.Types
	// At is the WAL position the columns were read at
	// (decode.Config.LiveFrom).
	At pglogrepl.LSN
	// Columns are the columns pgoutput sends of each outbox table
	// (schema.table), in order (decode.Config.Columns).
	Columns map[string][]string
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
