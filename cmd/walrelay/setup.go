package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/marker"
	"github.com/walrelay/walrelay/pgcatalog"
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
	// N.B. the names are checked on every path, --print included (which
	// tolerates a missing --pg-url): each is written into SQL, the
	// replication protocol or pg_hba.conf.
	if err := setupNames(cfg.slot, cfg.publication, *role, tables); err != nil {
		fmt.Fprintf(stderr, "walrelay: invalid configuration:\n%v", indent(err))
		return exitConfig
	}
	if rc.NoTables {
		tables = nil // the message source alone: an empty publication
	}
	password := os.Getenv("WALRELAY_SETUP_ROLE_PASSWORD")
	type stmt struct {
		sql string
		// exists finds the object (its one argument is existsArg); sql
		// is skipped then, or ifExists runs instead, then existsNote is
		// printed.
		exists, existsArg    string
		ifExists, existsNote string
	}
	var stmts []stmt
	if *role != "" {
		r := pgx.Identifier{*role}.Sanitize()
		// N.B. the role's password goes to the server as a SCRAM-SHA-256
		// verifier computed here, never as itself: a statement's text
		// reaches the server log (log_statement, or any error), and
		// pg_stat_activity.
		pw := ""
		if password != "" {
			v, err := scramVerifier(password)
			if err != nil {
				fmt.Fprintf(stderr, "walrelay: %v\n", err)
				return exitRuntime
			}
			pw = " PASSWORD " + quoteLiteral(v)
		}
		create := stmt{sql: fmt.Sprintf("CREATE ROLE %s WITH LOGIN REPLICATION%s", r, pw),
			exists: `SELECT 1 FROM pg_roles WHERE rolname = $1`, existsArg: *role,
			existsNote: fmt.Sprintf("role %s exists: its password was NOT changed (pass --rotate-password to set it to WALRELAY_SETUP_ROLE_PASSWORD)", r)}
		if *rotate {
			create.ifExists = fmt.Sprintf("ALTER ROLE %s WITH%s", r, pw)
			create.existsNote = ""
		}
		stmts = append(stmts, create)
		// N.B. no SELECT on the outbox: pgoutput sends the published
		// inserts to a REPLICATION role without it (only a subscription's
		// initial table copy needs it, which walrelay never makes).
		// USAGE lets walrelay look the tables up by name; it reads no rows.
		schemas := map[string]bool{}
		for _, t := range tables {
			s, _, _ := decode.SplitTable(t)
			if !schemas[s] {
				schemas[s] = true
				stmts = append(stmts, stmt{sql: fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", pgx.Identifier{s}.Sanitize(), r)})
			}
		}
	}
	stmts = append(stmts,
		stmt{sql: pgcatalog.CreatePublicationSQL(cfg.publication, tables),
			exists: `SELECT 1 FROM pg_publication WHERE pubname = $1`, existsArg: cfg.publication},
		stmt{sql: strings.TrimSuffix(pgcatalog.CreateSlotSQL(cfg.slot, false), ";"),
			exists: `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, existsArg: cfg.slot},
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
		user := hbaQuote(*role)
		if *role == "" {
			user = "<walrelay's role>"
		}
		return fmt.Sprintf("# pg_hba.conf: logical replication connections match the database name, not the 'replication' keyword;\n# TLS only (hostssl), and replace <CIDR> with walrelay's addresses (e.g. 10.1.2.3/32).\nhostssl    %s    %s    <CIDR>    scram-sha-256", db, user)
	}
	if *print {
		fmt.Fprintln(stdout, "-- Run as the outbox table's owner or a superuser, in the outbox's database.")
		if *role != "" {
			fmt.Fprintln(stdout, "-- The role gets no privilege on the outbox's rows: REPLICATION streams the slot (see the README's Security), USAGE lets it look the tables up.")
			if password == "" {
				fmt.Fprintf(stdout, "-- Then set its password in psql with \\password %s (psql sends a SCRAM-SHA-256 verifier, never the password).\n", pgx.Identifier{*role}.Sanitize())
			}
		}
		for _, s := range stmts {
			fmt.Fprintln(stdout, s.sql+";")
		}
		if cfg.slotFailover.mode != replication.FailoverOff {
			fmt.Fprintln(stdout, "-- On PostgreSQL 17+, create a failover slot instead (README \"Failover\"):\n-- "+pgcatalog.CreateSlotSQL(cfg.slot, true))
		}
		fmt.Fprintln(stdout, "\n"+hba("<database>"))
		return exitOK
	}
	if *role != "" && password == "" {
		fmt.Fprintln(stderr, "walrelay: set WALRELAY_SETUP_ROLE_PASSWORD to the new role's password, or pass --role '' to skip creating a role")
		return exitConfig
	}
	if !pgTLSWarnings(c, "", stderr) {
		return exitConfig
	}
	for _, w := range cfg.securityWarnings {
		c.log.Warn(w) // setup reads the slot markers from Kafka
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
		stmts[slotStmt].sql = strings.TrimSuffix(pgcatalog.CreateSlotSQL(cfg.slot, true), ";")
	}
	if code := setupSlotGone(ctx, c, conn, db, stderr); code >= 0 {
		return code
	}
	for _, s := range stmts {
		if s.exists != "" {
			var one int
			if err := conn.QueryRow(ctx, s.exists, s.existsArg).Scan(&one); err == nil {
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
	fmt.Fprintln(stdout, "\n"+hba(hbaDatabase(db)))
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

// redactPassword hides the role's password verifier in the statements
// setup prints (it allows an offline guess at the password).
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
	sys, err := pgcatalog.SystemID(ctx, c.rc)
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

// roleRE is what setup takes as a role name: letters, digits, '_', '-' and
// '.', not starting with a digit, '-' or '.', 1-63 bytes (PostgreSQL
// truncates longer names).
var roleRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,62}$`)

// setupNames checks every name setup writes into SQL and pg_hba.conf,
// reporting each mistake with its fix.
func setupNames(slot, publication, role string, tables []string) error {
	var errs []error
	if err := replication.ValidateName("--slot", slot); err != nil {
		errs = append(errs, err)
	}
	if err := replication.ValidateName("--publication", publication); err != nil {
		errs = append(errs, err)
	}
	if len(tables) == 0 {
		errs = append(errs, errors.New("--table is empty: name at least one outbox table"))
	}
	for _, t := range tables {
		if err := replication.ValidateTableName(t); err != nil {
			errs = append(errs, fmt.Errorf("--table: %w", err))
		}
	}
	switch lower := strings.ToLower(role); {
	case role == "":
	case !roleRE.MatchString(role):
		errs = append(errs, fmt.Errorf("--role %q: use 1-63 letters, digits, '_', '-' and '.', starting with a letter or '_'", role))
	case strings.HasPrefix(lower, "pg_"):
		errs = append(errs, fmt.Errorf("--role %q: names starting with pg_ are reserved for PostgreSQL's own roles: choose another, e.g. walrelay", role))
	case slices.Contains([]string{"public", "none", "current_user", "current_role", "session_user", "all"}, lower):
		errs = append(errs, fmt.Errorf("--role %q: a reserved role name or pg_hba.conf keyword: choose another, e.g. walrelay", role))
	}
	return errors.Join(errs...)
}

// quoteLiteral is s as an SQL string literal (standard_conforming_strings,
// on by default since PostgreSQL 9.1: a backslash is an ordinary character).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// hbaQuote is a role or database name as a pg_hba.conf field: quoted, so
// that it is never read as a keyword (all, sameuser, replication, ...) or
// a group (+name); setupNames keeps '"' and blanks out of role names.
func hbaQuote(name string) string { return `"` + name + `"` }

// hbaDatabase is the database field of the printed pg_hba.conf line: the
// name as it is when it is a plain lower-case name that is no keyword, else
// quoted (a '"' in it cannot be written in pg_hba.conf: a placeholder then).
func hbaDatabase(db string) string {
	switch {
	case strings.ContainsAny(db, "\"\n\r"):
		return "<database>"
	case regexp.MustCompile(`^[a-z_][a-z0-9_]*$`).MatchString(db) && !slices.Contains([]string{"all", "sameuser", "samerole", "samegroup", "replication"}, db):
		return db
	}
	return hbaQuote(db)
}
