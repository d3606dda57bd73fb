package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/marker"
	"github.com/walrelay/walrelay/replication"
)

// setupCmd creates, or with --print prints, the SQL for a least-privilege
// role, the publication and the slot, and the pg_hba.conf line.
func setupCmd(args []string, stdout, stderr io.Writer) int {
	var print *bool
	var role *string
	var rotate *bool
	c, code := parseCommand("setup", args, stderr, func(fs *flag.FlagSet) {
		print = fs.Bool("print", false, "print the SQL instead of running it")
		role = fs.String("role", "walrelay", "least-privilege role to create for walrelay (empty: none); its password comes from WALRELAY_SETUP_ROLE_PASSWORD")
		rotate = fs.Bool("rotate-password", false, "when the role exists, set its password to WALRELAY_SETUP_ROLE_PASSWORD (without it an existing role keeps its password)")
	}, func() bool { return *print })
	if code >= 0 {
		return code
	}
	cfg, rc := c.cfg, c.rc
	tables := splitList(cfg.tables)
	if rc.NoTables {
		tables = nil // the message source alone: an empty publication, no grant
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		s, n, err := decode.SplitTable(t)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: %v\n", err)
			return exitConfig
		}
		quoted[i] = pgx.Identifier{s, n}.Sanitize()
	}
	password := os.Getenv("WALRELAY_SETUP_ROLE_PASSWORD")
	type stmt struct {
		sql, exists string
		// ifExists runs instead when exists finds the object; "" when
		// nothing is to be done then. existsNote is printed after it.
		ifExists, existsNote string
	}
	var stmts []stmt
	if *role != "" {
		r := pgx.Identifier{*role}.Sanitize()
		pw := "'<password>'"
		if password != "" && !*print {
			pw = "'" + strings.ReplaceAll(password, "'", "''") + "'"
		}
		create := stmt{sql: fmt.Sprintf("CREATE ROLE %s WITH LOGIN REPLICATION PASSWORD %s", r, pw),
			exists:     fmt.Sprintf("SELECT 1 FROM pg_roles WHERE rolname = '%s'", strings.ReplaceAll(*role, "'", "''")),
			existsNote: fmt.Sprintf("role %s exists: its password was NOT changed (pass --rotate-password to set it to WALRELAY_SETUP_ROLE_PASSWORD)", r)}
		if *rotate {
			create.ifExists = fmt.Sprintf("ALTER ROLE %s WITH PASSWORD %s", r, pw)
			create.existsNote = ""
		}
		stmts = append(stmts, create)
		schemas := map[string]bool{}
		for _, t := range tables {
			s, _, _ := decode.SplitTable(t)
			if !schemas[s] {
				schemas[s] = true
				stmts = append(stmts, stmt{sql: fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", pgx.Identifier{s}.Sanitize(), r)})
			}
		}
		if len(quoted) > 0 {
			stmts = append(stmts, stmt{sql: fmt.Sprintf("GRANT SELECT ON %s TO %s", strings.Join(quoted, ", "), r)})
		}
	}
	stmts = append(stmts,
		stmt{sql: replication.CreatePublicationSQL(cfg.publication, tables),
			exists: fmt.Sprintf("SELECT 1 FROM pg_publication WHERE pubname = '%s'", cfg.publication)},
		stmt{sql: strings.TrimSuffix(replication.CreateSlotSQL(cfg.slot, false), ";"),
			exists: fmt.Sprintf("SELECT 1 FROM pg_replication_slots WHERE slot_name = '%s'", cfg.slot)},
	)
	slotStmt := len(stmts) - 1
	if rc.Messages {
		emit, err := emitSQL(c.dc)
		if err != nil {
			fmt.Fprintf(stderr, "walrelay: %v\n", err)
			return exitConfig
		}
		for _, e := range emit {
			stmts = append(stmts, stmt{sql: e})
		}
	}
	hba := func(db string) string {
		user := *role
		if user == "" {
			user = "<walrelay's role>"
		}
		return fmt.Sprintf("# pg_hba.conf: logical replication connections match the database name, not the 'replication' keyword;\n# narrow the address to walrelay's hosts.\nhost    %s    %s    0.0.0.0/0    scram-sha-256", db, user)
	}
	if *print {
		fmt.Fprintln(stdout, "-- Run as the outbox table's owner or a superuser, in the outbox's database.")
		if *role != "" {
			fmt.Fprintln(stdout, "-- The role needs no other privilege: REPLICATION streams the slot; SELECT lets `walrelay check` read the table.")
		}
		for _, s := range stmts {
			fmt.Fprintln(stdout, s.sql+";")
		}
		if cfg.slotFailover.mode != replication.FailoverOff {
			fmt.Fprintln(stdout, "-- On PostgreSQL 17+, create a failover slot instead (README \"Failover\"):\n-- "+replication.CreateSlotSQL(cfg.slot, true))
		}
		fmt.Fprintln(stdout, "\n"+hba("<database>"))
		return exitOK
	}
	if *role != "" && password == "" {
		fmt.Fprintln(stderr, "walrelay: set WALRELAY_SETUP_ROLE_PASSWORD to the new role's password, or pass --role '' to skip creating a role")
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, rc.ConnString)
	if err != nil {
		return connectFailed(stderr, err, rc.ConnString)
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		fmt.Fprintf(stderr, "walrelay: %v\n", err)
		return exitRuntime
	}
	// N.B. a failover slot on 17+ unless --slot-failover=false, as run
	// creates it.
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		fmt.Fprintf(stderr, "walrelay: read server version: %v\n", err)
		return exitRuntime
	}
	if version >= 170000 && cfg.slotFailover.mode != replication.FailoverOff {
		stmts[slotStmt].sql = strings.TrimSuffix(replication.CreateSlotSQL(cfg.slot, true), ";")
	}
	if code := setupSlotGone(ctx, c, conn, db, stderr); code >= 0 {
		return code
	}
	for _, s := range stmts {
		if s.exists != "" {
			var one int
			if err := conn.QueryRow(ctx, s.exists).Scan(&one); err == nil {
				if s.ifExists == "" {
					note := s.existsNote
					if note == "" {
						note = redactPassword(s.sql)
					}
					fmt.Fprintf(stdout, "exists: %s\n", note)
					continue
				}
				s.sql = s.ifExists
			}
		}
		if _, err := conn.Exec(ctx, s.sql); err != nil {
			fmt.Fprintf(stderr, "walrelay: %s: %v\n", redactPassword(s.sql), err)
			return exitConfig
		}
		fmt.Fprintf(stdout, "done:   %s\n", redactPassword(s.sql))
	}
	fmt.Fprintln(stdout, "\n"+hba(db))
	return exitOK
}

// emitSQL is the SQL that creates walrelay.emit(aggregatetype, aggregateid,
// type, payload jsonb), which emits one event of the message source in the
// caller's transaction and returns its id. The content's keys are the
// column names the flags configure; it is written with jsonb's text
// output, so its payload reaches Kafka as a jsonb payload column renders.
func emitSQL(dc decode.Config) ([]string, error) {
	mapped, err := decode.MappedColumns(dc)
	if err != nil {
		return nil, err
	}
	prefix := dc.MessagePrefix
	if prefix == "" {
		prefix = "outbox"
	}
	keys := []struct{ name, value string }{
		{dc.IDColumn, "id"}, {"aggregatetype", "aggregatetype"}, {dc.KeyColumn, "aggregateid"}, {"type", "type"}, {dc.PayloadColumn, "payload"},
	}
	written := map[string]bool{}
	for _, k := range keys {
		written[k.name] = true
	}
	var unwritten []string
	for _, col := range sortedNames(mapped) {
		if !written[col] {
			unwritten = append(unwritten, fmt.Sprintf("%q (%s)", col, mapped[col]))
		}
	}
	if len(unwritten) > 0 {
		return nil, fmt.Errorf("walrelay.emit writes the fields %s, %s, %s, aggregatetype and type, and the mapping also names %s: every event it emitted would be poison; map only those fields, or emit the JSON content with pg_logical_emit_message(true, '%s', ...) yourself and run setup with --source tables",
			dc.IDColumn, dc.KeyColumn, dc.PayloadColumn, strings.Join(unwritten, ", "), prefix)
	}
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	args := make([]string, len(keys))
	for i, k := range keys {
		args[i] = lit(k.name) + ", " + k.value
	}
	// N.B. transactional (true): the message is decoded at its
	// transaction's commit, in WAL order with its rows, and dropped on
	// rollback. gen_random_uuid is core since PostgreSQL 13.
	return []string{
		"CREATE SCHEMA IF NOT EXISTS walrelay",
		"CREATE OR REPLACE FUNCTION walrelay.emit(aggregatetype text, aggregateid text, type text, payload jsonb) RETURNS uuid\n" +
			"LANGUAGE plpgsql VOLATILE AS $emit$\n" +
			"DECLARE id uuid := gen_random_uuid();\n" +
			"BEGIN\n" +
			"  PERFORM pg_logical_emit_message(true, " + lit(prefix) + ", jsonb_build_object(" + strings.Join(args, ", ") + ")::text);\n" +
			"  RETURN id;\n" +
			"END\n" +
			"$emit$",
		"GRANT USAGE ON SCHEMA walrelay TO PUBLIC",
	}, nil
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func redactPassword(sql string) string {
	if i := strings.Index(sql, " PASSWORD "); i >= 0 {
		return sql[:i] + " PASSWORD '***'"
	}
	return sql
}

// setupSlotGone refuses to create a slot walrelay streamed from (its marker
// is on --checkpoint-topic) unless --recreate-missing-slot: exit 3, as run.
// It returns -1 to go on.
func setupSlotGone(ctx context.Context, c *command, conn *pgx.Conn, db string, stderr io.Writer) int {
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, c.cfg.slot).Scan(&n); err != nil || n > 0 || c.cfg.recreateMissing {
		return -1
	}
	mc := c.markerConfig()
	mc.CreateTopic = false
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := marker.Open(kctx, mc, zap.NewNop())
	if errors.Is(err, marker.ErrSetup) {
		return -1 // no compacted marker topic: no marker
	}
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: warning: cannot read the slot markers on %s (%v): if walrelay streamed from slot %q before, creating it again skips the events committed since\n", c.cfg.checkpointTopic, err, c.cfg.slot)
		return -1
	}
	defer ms.Close()
	sys, err := replication.SystemID(ctx, c.rc)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: read the system identifier, to look for the slot's marker: %v\n", err)
		return exitRuntime
	}
	lsn, at, found, err := ms.LastConfirmed(ctx, sys, db, c.cfg.slot)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: read the slot's marker: %v\n", err)
		return exitRuntime
	}
	if !found {
		return -1
	}
	fmt.Fprintf(stderr, "walrelay: replication slot gone: slot %q of database %q on system %s was last confirmed at %s (recorded %s) and no longer exists: setup does not create it again, which would skip the events committed since (see the README's \"Failover\"); pass --recreate-missing-slot to create it and accept the gap\n",
		c.cfg.slot, db, sys, lsn, at.UTC().Format(time.RFC3339))
	return exitSlotLost
}
