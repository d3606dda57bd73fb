package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

func preparePublication(ctx context.Context, conn *pgx.Conn, cfg replication.Config, log *zap.Logger, dryRun bool) (string, error) {
	var pubOID uint32
	var pubInsert, pubViaRoot, allTables bool
	err := conn.QueryRow(ctx, `SELECT oid, pubinsert, pubviaroot, puballtables FROM pg_publication WHERE pubname = $1`,
		cfg.Publication).Scan(&pubOID, &pubInsert, &pubViaRoot, &allTables)
	if errors.Is(err, pgx.ErrNoRows) {
		sql := CreatePublicationSQL(cfg.Publication, pubTables(cfg))
		if !cfg.Create {
			return "", setupErrorf("publication %q does not exist: run %s; or start with --create", cfg.Publication, sql)
		}
		if dryRun {
			return "missing: will be created at start (--create): " + sql, nil
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object: created concurrently
				return preparePublication(ctx, conn, cfg, log, dryRun)
			}
			if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
				return "", setupErrorf("create publication %q: %s: the table owner or a superuser must run %s;", cfg.Publication, pgErr.Message, sql)
			}
			return "", fmt.Errorf("create publication: %w", err)
		}
		log.Info("created publication", zap.String("publication", cfg.Publication), zap.Strings("tables", pubTables(cfg)))
		return "created", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up publication: %w", err)
	}
	if cfg.NoTables {
		// N.B. pgoutput sends the messages whatever the publication
		// lists, but it looks the publication up at the first row change
		// of any table of the database: a missing one stops the stream
		// there before PostgreSQL 18 ("publication ... does not exist"),
		// and 18 warns and skips it. With no outbox table it only has to
		// exist, empty.
		return "exists; --source messages needs no table in it (pgoutput requires a publication to name)", nil
	}
	pub := quoteIdent(cfg.Publication)
	if !pubInsert {
		return "", setupErrorf("publication %q does not publish inserts: run ALTER PUBLICATION %s SET (publish = 'insert');", cfg.Publication, pub)
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	// Whether each outbox is published, read from the catalog rather than
	// from pg_publication_tables, which lists a partitioned table's
	// partitions instead of the table when publish_via_partition_root is
	// off. FOR TABLES IN SCHEMA (pg_publication_namespace) is PostgreSQL 15+.
	bySchema := `false`
	if version >= 150000 {
		bySchema = `EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnpubid = $1 AND pn.pnnspid = c.relnamespace)`
	}
	query := `SELECT c.relkind = 'p',
		EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = $1 AND pr.prrelid = c.oid) OR ` + bySchema + `,
		ARRAY(SELECT n.nspname || '.' || l.relname FROM pg_publication_rel pr
			JOIN pg_class l ON l.oid = pr.prrelid JOIN pg_namespace n ON n.oid = l.relnamespace
			WHERE pr.prpubid = $1 AND pr.prrelid IN (SELECT relid FROM pg_partition_tree(c.oid) WHERE relid <> c.oid)
			ORDER BY 1)
		FROM pg_class c WHERE c.oid = to_regclass($2)`
	var missing, fixes, partitioned []string
	for _, t := range cfg.Tables {
		var isPartitioned, listed bool
		var leaves []string
		err := conn.QueryRow(ctx, query, pubOID, quoteTable(t)).Scan(&isPartitioned, &listed, &leaves)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // a missing table fails the tables' step
		}
		if err != nil {
			return "", fmt.Errorf("look up publication of table %s: %w", t, err)
		}
		if isPartitioned {
			partitioned = append(partitioned, t)
		}
		if allTables || listed {
			continue
		}
		fix := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", pub, quoteTable(t))
		if len(leaves) > 0 {
			// N.B. a publication of some partitions publishes only those
			// partitions' rows: the others', and those of partitions
			// attached later, would never be relayed.
			return "", setupErrorf("publication %q lists partitions %s of outbox %s but not the table itself, so rows of its other partitions are not published: run %s%s",
				cfg.Publication, strings.Join(leaves, ", "), t, fix, viaRootFix(pub, pubViaRoot))
		}
		missing = append(missing, t)
		fixes = append(fixes, fix)
	}
	if len(missing) > 0 {
		return "", setupErrorf("publication %q does not include table %s: run %s%s",
			cfg.Publication, strings.Join(missing, ", "), strings.Join(fixes, " "), viaRootFix(pub, pubViaRoot || len(partitioned) == 0))
	}
	var errs []error
	if len(partitioned) > 0 && !pubViaRoot {
		// N.B. without publish_via_partition_root pgoutput names each row
		// after its partition; walrelay would have to guess which outbox
		// a partition belongs to, and cannot once the partition is dropped.
		errs = append(errs, setupErrorf("publication %q sends the rows of partitioned outbox %s under each partition's name (publish_via_partition_root is off): run%s",
			cfg.Publication, strings.Join(partitioned, ", "), viaRootFix(pub, false)))
	}
	// N.B. row filters and column lists are PostgreSQL 15+ (prqual,
	// prattrs); a FOR ALL TABLES publication has neither.
	if version >= 150000 && !allTables {
		if err := checkRowsAndColumns(ctx, conn, cfg, pubOID); err != nil {
			if !errors.Is(err, replication.ErrSetup) {
				return "", err
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return fmt.Sprintf("publishes inserts of %s", strings.Join(cfg.Tables, ", ")), nil
}

// viaRootFix is the statement that turns publish_via_partition_root on,
// with a leading space, or "" when it is on.
func viaRootFix(pub string, on bool) string {
	if on {
		return ""
	}
	return fmt.Sprintf(" ALTER PUBLICATION %s SET (publish_via_partition_root = true);", pub)
}
