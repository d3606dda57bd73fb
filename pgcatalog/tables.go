package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

func (p *prep) tables(ctx context.Context) (string, error) {
	if p.cfg.NoTables {
		return "none: --source messages reads no outbox table", nil
	}
	var missing []string
	var errs []error
	for _, t := range p.cfg.Tables {
		var relkind, root string
		var isPartition bool
		var foreign []string
		err := p.conn.QueryRow(ctx, `SELECT c.relkind::text, c.relispartition, coalesce(rn.nspname || '.' || r.relname, ''),
				ARRAY(SELECT fn.nspname || '.' || f.relname FROM pg_partition_tree(c.oid) pt
					JOIN pg_class f ON f.oid = pt.relid JOIN pg_namespace fn ON fn.oid = f.relnamespace
					WHERE f.relkind = 'f' ORDER BY 1)
			FROM pg_class c
			LEFT JOIN pg_class r ON r.oid = pg_partition_root(c.oid)
			LEFT JOIN pg_namespace rn ON rn.oid = r.relnamespace
			WHERE c.oid = to_regclass($1)`, quoteTable(t)).Scan(&relkind, &isPartition, &root, &foreign)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			missing = append(missing, t)
		case err != nil:
			return "", fmt.Errorf("look up table %s: %w", t, err)
		case isPartition:
			// N.B. with publish_via_partition_root pgoutput names every
			// partition's rows after the root, never after a partition: an
			// outbox is its partition tree's root.
			errs = append(errs, setupErrorf("outbox table %s is a partition of %s: name the partitioned table, not a partition: --table %s", t, root, root))
		case relkind != "r" && relkind != "p":
			errs = append(errs, setupErrorf("outbox %s is not a table (relkind %q): walrelay relays inserts into a table or a partitioned table: fix --table", t, relkind))
		case len(foreign) > 0:
			// N.B. rows routed to a foreign-table partition are written on
			// another server: they never reach this server's WAL.
			errs = append(errs, setupErrorf("outbox %s has foreign-table partitions %s, whose rows are stored on another server and never reach this WAL: detach them (ALTER TABLE %s DETACH PARTITION ...)", t, strings.Join(foreign, ", "), quoteTable(t)))
		}
	}
	if len(missing) > 0 {
		return "", setupErrorf("outbox table %s does not exist in database %q: create it (see the README's \"Against your own servers\") or fix --table", strings.Join(missing, ", "), p.db)
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return strings.Join(p.cfg.Tables, ", "), nil
}
