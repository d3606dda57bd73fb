package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/decode"
)

// ErrColumns is wrapped when an outbox table lacks a column the mapping or
// the topic template names: a setup error.
var ErrColumns = errors.New("outbox table lacks a mapped column")

// MappedColumns returns each column the mapping and the topic template
// name, with the flag that names it.
func MappedColumns(dc decode.Config) (map[string]string, error) {
	tmpl, err := decode.ParseTemplate(dc.Topic)
	if err != nil {
		return nil, err
	}
	want := map[string]string{dc.IDColumn: "--id-column", dc.KeyColumn: "--key-column", dc.PayloadColumn: "--payload-column"}
	for _, h := range dc.HeaderColumns {
		want[h.Column] = "--header-columns"
	}
	for _, c := range tmpl.Columns() {
		want[c] = "--topic"
	}
	return want, nil
}

// CheckColumns verifies before streaming that each outbox table has every
// column the mapping and the topic template name.
func CheckColumns(ctx context.Context, connString string, dc decode.Config) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	want, err := MappedColumns(dc)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range dc.Tables {
		schema, table, _ := decode.SplitTable(t)
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_attribute a
			JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, schema, table)
		if err != nil {
			return fmt.Errorf("list columns of %s: %w", t, err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("list columns of %s: %w", t, err)
		}
		if len(cols) == 0 {
			continue // a missing table is reported by the setup checks
		}
		have := map[string]bool{}
		for _, c := range cols {
			have[c] = true
		}
		for col, flag := range want {
			if !have[col] {
				errs = append(errs, fmt.Errorf("table %s has no column %q (named by %s); its columns are %s", t, col, flag, strings.Join(cols, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrColumns, errors.Join(errs...))
	}
	return nil
}
