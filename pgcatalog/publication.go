package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

func (p *prep) publication(ctx context.Context) (string, error) {
	if !p.dryRun {
		// N.B. the same check as the dry run, so that run refuses with
		// the fix rather than with PostgreSQL's "permission denied".
		if err := p.mayCreatePublication(ctx); err != nil {
			return "", err
		}
	}
	note, err := preparePublication(ctx, p.conn, p.cfg, p.log, p.dryRun)
	if err != nil {
		return "", err
	}
	if p.dryRun {
		if err := p.mayCreatePublication(ctx); err != nil {
			return "", err
		}
	}
	warnings, err := publicationWarnings(ctx, p.conn, p.cfg)
	if err != nil {
		return "", err
	}
	for _, w := range warnings {
		if !p.dryRun {
			p.log.Warn(w, zap.String("publication", p.cfg.Publication))
		}
	}
	p.warnings = append(p.warnings, warnings...)
	return note, nil
}

// mayCreatePublication refuses, with the fix, a missing publication that
// --create would create but the role may not: CREATE PUBLICATION needs the
// CREATE privilege on the database and ownership of every table it lists
// (a superuser has both).
func (p *prep) mayCreatePublication(ctx context.Context) error {
	if !p.cfg.Create {
		return nil
	}
	var exists, mayCreate bool
	var notOwned []string
	err := p.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
			has_database_privilege(current_database(), 'CREATE'),
			ARRAY(SELECT c.oid::regclass::text FROM unnest($2::text[]) t JOIN pg_class c ON c.oid = to_regclass(t)
				WHERE NOT pg_has_role(c.relowner, 'USAGE') ORDER BY 1)`,
		p.cfg.Publication, quoteTables(pubTables(p.cfg))).Scan(&exists, &mayCreate, &notOwned)
	if err != nil {
		return fmt.Errorf("read the role's privileges: %w", err)
	}
	if exists || mayCreate && len(notOwned) == 0 {
		return nil
	}
	var lacks []string
	if !mayCreate {
		lacks = append(lacks, fmt.Sprintf("the CREATE privilege on database %q", p.db))
	}
	if len(notOwned) > 0 {
		lacks = append(lacks, "ownership of "+strings.Join(notOwned, ", "))
	}
	return setupErrorf("role %q may not create publication %q (--create): it lacks %s: have the table owner or a superuser run %s; (`walrelay setup --print` shows every statement), then start with --create=false",
		p.user, p.cfg.Publication, strings.Join(lacks, " and "), CreatePublicationSQL(p.cfg.Publication, pubTables(p.cfg)))
}

// pubTables are the tables the publication must list: none for the
// message source alone.
func pubTables(c replication.Config) []string {
	if c.NoTables {
		return nil
	}
	return c.Tables
}

// CreatePublicationSQL is the statement that creates the publication of
// cfg's tables.
//
// N.B. publish_via_partition_root: pgoutput sends a partition's rows under
// the partition's name unless it is set, and the decoder would take them
// for another table's. It changes nothing for a table that is not
// partitioned (PostgreSQL 13 and later).
//
// With no tables it creates an empty publication: the message source
// alone needs one to name (pgoutput refuses a stream without
// publication_names), and a publication of no table has pgoutput send no
// row at all.
func CreatePublicationSQL(publication string, tables []string) string {
	if len(tables) == 0 {
		return "CREATE PUBLICATION " + quoteIdent(publication)
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = quoteTable(t)
	}
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert', publish_via_partition_root = true)",
		quoteIdent(publication), strings.Join(quoted, ", "))
}

// publicationWarnings are what an existing publication does that walrelay
// does not need and that costs its database: publishing every table, or
// changes other than inserts.
//
// N.B. a warning, not a refusal: walrelay relays such a publication
// correctly (it drops what is not an outbox insert), but PostgreSQL decodes
// and sends all of it, and an UPDATE or DELETE of a published table without
// a replica identity fails in the application ("cannot update table ...
// because it does not have a replica identity and publishes updates").
func publicationWarnings(ctx context.Context, conn *pgx.Conn, cfg replication.Config) ([]string, error) {
	var allTables, update, del, truncate bool
	err := conn.QueryRow(ctx, `SELECT puballtables, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1`,
		cfg.Publication).Scan(&allTables, &update, &del, &truncate)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // missing: created as walrelay needs it
	}
	if err != nil {
		return nil, fmt.Errorf("look up publication: %w", err)
	}
	pub := quoteIdent(cfg.Publication)
	var out []string
	if cfg.NoTables {
		var tables int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_publication_tables WHERE pubname = $1`, cfg.Publication).Scan(&tables); err != nil {
			return nil, fmt.Errorf("look up publication tables: %w", err)
		}
		if allTables || tables > 0 {
			out = append(out, fmt.Sprintf("publication %q publishes %d tables, and --source messages relays none of them: PostgreSQL decodes and sends their changes, which walrelay drops (walrelay_changes_other_tables_total counts them): give walrelay a publication of no table: BEGIN; DROP PUBLICATION %s; %s; COMMIT;",
				cfg.Publication, tables, pub, CreatePublicationSQL(cfg.Publication, nil)))
		}
		return out, nil
	}
	if allTables {
		out = append(out, fmt.Sprintf("publication %q is FOR ALL TABLES: PostgreSQL decodes and sends every table's changes, which walrelay drops (walrelay_changes_other_tables_total counts them), and UPDATE or DELETE on any table without a replica identity fails while it publishes them: replace it with a publication of the outbox alone, in one transaction: BEGIN; DROP PUBLICATION %s; %s; COMMIT;",
			cfg.Publication, pub, CreatePublicationSQL(cfg.Publication, cfg.Tables)))
	}
	var ops []string
	for _, o := range []struct {
		on   bool
		name string
	}{{update, "update"}, {del, "delete"}, {truncate, "truncate"}} {
		if o.on {
			ops = append(ops, o.name)
		}
	}
	// N.B. the FOR ALL TABLES fix makes an insert-only publication too.
	if len(ops) > 0 && !allTables {
		out = append(out, fmt.Sprintf("publication %q publishes %s besides insert: walrelay relays inserts only, PostgreSQL decodes and sends the rest for nothing, and UPDATE or DELETE of a published table without a replica identity fails: run ALTER PUBLICATION %s SET (publish = 'insert');",
			cfg.Publication, strings.Join(ops, ", "), pub))
	}
	return out, nil
}
