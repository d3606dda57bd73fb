package pgcatalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/replication"
)

// SetupStatement is one statement of `walrelay setup`: SQL creates an
// object; Exists, when set, finds it (its one argument is ExistsArg), and
// SQL is skipped then, or IfExists runs instead; ExistsNote is what setup
// prints for a skipped statement (empty: the statement, redacted).
type SetupStatement struct {
	SQL                  string
	Exists, ExistsArg    string
	IfExists, ExistsNote string
}

// RoleStatements are the statements that create role, a least-privilege
// walrelay role, with password (none when empty) and USAGE on the schemas
// of tables; with rotate an existing role gets the password, else it keeps
// its own.
func RoleStatements(role, password string, rotate bool, tables []string) ([]SetupStatement, error) {
	r := QuoteRole(role)
	// N.B. the role's password goes to the server as a SCRAM-SHA-256
	// verifier computed here, never as itself: a statement's text
	// reaches the server log (log_statement, or any error), and
	// pg_stat_activity.
	pw := ""
	if password != "" {
		v, err := ScramVerifier(password)
		if err != nil {
			return nil, err
		}
		pw = " PASSWORD " + quoteLiteral(v)
	}
	create := SetupStatement{SQL: fmt.Sprintf("CREATE ROLE %s WITH LOGIN REPLICATION%s", r, pw),
		Exists: `SELECT 1 FROM pg_roles WHERE rolname = $1`, ExistsArg: role,
		ExistsNote: fmt.Sprintf("role %s exists: its password was NOT changed (pass --rotate-password to set it to WALRELAY_SETUP_ROLE_PASSWORD)", r)}
	if rotate {
		create.IfExists = fmt.Sprintf("ALTER ROLE %s WITH%s", r, pw)
		create.ExistsNote = ""
	}
	stmts := []SetupStatement{create}
	// N.B. no SELECT on the outbox: pgoutput sends the published
	// inserts to a REPLICATION role without it (only a subscription's
	// initial table copy needs it, which walrelay never makes).
	// USAGE lets walrelay look the tables up by name; it reads no rows.
	schemas := map[string]bool{}
	for _, t := range tables {
		s, _, _ := decode.SplitTable(t)
		if !schemas[s] {
			schemas[s] = true
			stmts = append(stmts, SetupStatement{SQL: fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", pgx.Identifier{s}.Sanitize(), r)})
		}
	}
	return stmts, nil
}

// PublicationStatement creates the publication of tables (none: an empty
// publication, for the message source alone).
func PublicationStatement(publication string, tables []string) SetupStatement {
	return SetupStatement{SQL: CreatePublicationSQL(publication, tables),
		Exists: `SELECT 1 FROM pg_publication WHERE pubname = $1`, ExistsArg: publication}
}

// SlotStatement creates the slot, a failover slot with failover
// (PostgreSQL 17+).
func SlotStatement(slot string, failover bool) SetupStatement {
	return SetupStatement{SQL: strings.TrimSuffix(CreateSlotSQL(slot, failover), ";"),
		Exists: `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, ExistsArg: slot}
}

// QuoteRole is role as an SQL identifier.
func QuoteRole(role string) string { return pgx.Identifier{role}.Sanitize() }

// SetupPlan is what `walrelay setup` creates, in order: the role (when
// named) and its grants, the publication, the slot, and any SQL added.
type SetupPlan struct {
	role, password string
	slot           string
	stmts          []SetupStatement
	slotStmt       int  // stmts' index of the slot
	messages       bool // for the message source (AddEmit)
	failover       bool // a failover slot (FailoverSlot)
}

// PlanSetup plans role (none when empty) with password, the publication of
// tables (nil: an empty one) and the slot, not yet a failover slot.
func PlanSetup(role, password string, rotate bool, publication, slot string, tables []string) (*SetupPlan, error) {
	p := &SetupPlan{role: role, password: password, slot: slot}
	if role != "" {
		var err error
		if p.stmts, err = RoleStatements(role, password, rotate, tables); err != nil {
			return nil, err
		}
	}
	p.stmts = append(p.stmts, PublicationStatement(publication, tables), SlotStatement(slot, false))
	p.slotStmt = len(p.stmts) - 1
	return p, nil
}

// AddEmit adds walrelay.emit for the message source of dc (EmitSQL).
func (p *SetupPlan) AddEmit(dc decode.Config) error {
	sql, err := EmitSQL(dc)
	if err != nil {
		return err
	}
	for _, s := range sql {
		p.stmts = append(p.stmts, SetupStatement{SQL: s})
	}
	p.messages = true
	return nil
}

// FailoverSlot makes the slot a failover slot (PostgreSQL 17+) and lets
// the role log running-transactions records (SnapshotGrantSQL).
func (p *SetupPlan) FailoverSlot() {
	p.stmts[p.slotStmt] = SlotStatement(p.slot, true)
	p.failover = true
	if p.role != "" {
		p.stmts = append(p.stmts, SetupStatement{SQL: SnapshotGrantSQL(p.role)})
	}
}

// SnapshotGrantSQL lets role call pg_log_standby_snapshot(), which
// PostgreSQL allows superusers alone by default: walrelay logs a
// running-transactions record with it, so that a standby synchronizes a
// new failover slot at its next cycle rather than after the server logs
// one by itself (docs/failover.md, SyncNudge).
func SnapshotGrantSQL(role string) string {
	return "GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO " + QuoteRole(role)
}

// StandbyGrantNote says what to run for --pg-standby-url's role, which
// wakes the standby's slot sync worker with pg_reload_conf(): setup does
// not grant it, since on the primary it would let role reload the
// primary's configuration too.
func StandbyGrantNote(role string) string {
	r := "<the role of --pg-standby-url>"
	if role != "" {
		r = QuoteRole(role) + " (or the role of --pg-standby-url)"
	}
	return fmt.Sprintf("with --pg-standby-url, walrelay wakes the standby's slot sync worker with pg_reload_conf() as that URL's role: a standby is read-only, so run on this primary (the grant reaches the standby with the WAL): GRANT EXECUTE ON FUNCTION pg_reload_conf() TO %s; (docs/failover.md)", r)
}

// Script writes the plan as an SQL script to run by hand (setup --print),
// with the failover slot to create instead on PostgreSQL 17+ when
// failover, and the pg_hba.conf line.
func (p *SetupPlan) Script(w io.Writer, failover bool) {
	fmt.Fprintln(w, "-- Run as the outbox table's owner or a superuser, in the outbox's database.")
	if p.role != "" {
		fmt.Fprintln(w, "-- The role gets no privilege on the outbox's rows: REPLICATION streams the slot (see docs/security.md), USAGE lets it look the tables up.")
		if p.password == "" {
			fmt.Fprintf(w, "-- Then set its password in psql with \\password %s (psql sends a SCRAM-SHA-256 verifier, never the password).\n", QuoteRole(p.role))
		}
	}
	for _, s := range p.stmts {
		fmt.Fprintln(w, s.SQL+";")
	}
	if failover {
		fmt.Fprintln(w, "-- On PostgreSQL 17+, create a failover slot instead (docs/failover.md):\n-- "+CreateSlotSQL(p.slot, true))
		if p.role != "" {
			fmt.Fprintln(w, "-- and let the role log running-transactions records, which make a standby's copy of the slot synchronizable at once:\n-- "+SnapshotGrantSQL(p.role)+";")
		}
		fmt.Fprintln(w, "-- On PostgreSQL 17+, "+StandbyGrantNote(p.role))
	}
	fmt.Fprintln(w, "\n"+HBALine(p.role, "<database>"))
}

// Apply runs the plan on c, skipping what exists, and writes one line per
// statement to w ("done:   SQL" or "exists: ..."), with the password
// redacted. It stops at the first statement that fails, naming it.
//
// N.B. first the database's encoding, as run checks it: setup creates
// nothing for a database walrelay would refuse (checkEncoding).
func (p *SetupPlan) Apply(ctx context.Context, c *CommandConn, w io.Writer) error {
	if _, err := readEncoding(ctx, c.conn, p.messages); err != nil {
		return err
	}
	for _, s := range p.stmts {
		ran, err := c.run(ctx, s)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", RedactPassword(ran), err)
		case ran == "":
			note := s.ExistsNote
			if note == "" {
				note = RedactPassword(s.SQL)
			}
			fmt.Fprintf(w, "exists: %s\n", note)
		default:
			fmt.Fprintf(w, "done:   %s\n", RedactPassword(ran))
		}
	}
	if p.failover {
		fmt.Fprintf(w, "note:   %s\n", StandbyGrantNote(p.role))
	}
	return nil
}

// emitParams are walrelay.emit's parameters; its overload with the trace
// context adds traceparent text.
const emitParams = "aggregatetype text, aggregateid text, type text, payload jsonb"

// EmitSQL is the SQL that creates walrelay.emit(aggregatetype, aggregateid,
// type, payload jsonb), which emits one event of the message source in the
// caller's transaction and returns its id, and, unless the trace-context
// field is off, walrelay.emit(..., traceparent text), which also writes
// its trace context (a W3C traceparent or Debezium's Properties text) as
// that field. The content's keys are the column names the flags
// configure; it is written with jsonb's text output, so its payload
// reaches Kafka as a jsonb payload column renders.
func EmitSQL(dc decode.Config) ([]string, error) {
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
	for _, col := range slices.Sorted(maps.Keys(mapped)) {
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
	create := func(sig string, args []string) string {
		return "CREATE OR REPLACE FUNCTION walrelay.emit(" + sig + ") RETURNS uuid\n" +
			"LANGUAGE plpgsql VOLATILE AS $emit$\n" +
			"DECLARE id uuid := gen_random_uuid();\n" +
			"BEGIN\n" +
			"  PERFORM pg_logical_emit_message(true, " + lit(prefix) + ", jsonb_build_object(" + strings.Join(args, ", ") + ")::text);\n" +
			"  RETURN id;\n" +
			"END\n" +
			"$emit$"
	}
	stmts := []string{"CREATE SCHEMA IF NOT EXISTS walrelay", create(emitParams, args)}
	if tc := dc.TraceColumn(); tc != "" {
		// N.B. an overload, not a parameter with a default: a function
		// an older setup made keeps its signature, and a call with four
		// arguments is never ambiguous. NULL: no context (JSON null).
		stmts = append(stmts, create(emitParams+", traceparent text", append(slices.Clone(args), lit(tc)+", traceparent")))
	}
	return append(stmts, "GRANT USAGE ON SCHEMA walrelay TO PUBLIC"), nil
}

// RedactPassword hides the role's password verifier in the statements
// setup prints (it allows an offline guess at the password).
func RedactPassword(sql string) string {
	if i := strings.Index(sql, " PASSWORD "); i >= 0 {
		return sql[:i] + " PASSWORD '***'"
	}
	return sql
}

// roleNameRE is what setup takes as a role name: letters, digits, '_', '-'
// and '.', not starting with a digit, '-' or '.', 1-63 bytes (PostgreSQL
// truncates longer names).
var roleNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,62}$`)

// SetupNames checks every name setup writes into SQL and pg_hba.conf,
// reporting each mistake with its fix.
func SetupNames(slot, publication, role string, tables []string) error {
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
	case !roleNameRE.MatchString(role):
		errs = append(errs, fmt.Errorf("--role %q: use 1-63 letters, digits, '_', '-' and '.', starting with a letter or '_'", role))
	case strings.HasPrefix(lower, "pg_"):
		errs = append(errs, fmt.Errorf("--role %q: names starting with pg_ are reserved for PostgreSQL's own roles: choose another, e.g. walrelay", role))
	case slices.Contains([]string{"public", "none", "current_user", "current_role", "session_user", "all"}, lower):
		errs = append(errs, fmt.Errorf("--role %q: a reserved role name or pg_hba.conf keyword: choose another, e.g. walrelay", role))
	}
	return errors.Join(errs...)
}

// HBALine is the pg_hba.conf line (with its comment) that lets role
// (empty: a placeholder) reach database field db over TLS.
func HBALine(role, db string) string {
	user := hbaQuote(role)
	if role == "" {
		user = "<walrelay's role>"
	}
	return fmt.Sprintf("# pg_hba.conf: logical replication connections match the database name, not the 'replication' keyword;\n# TLS only (hostssl), and replace <CIDR> with walrelay's addresses (e.g. 10.1.2.3/32).\nhostssl    %s    %s    <CIDR>    scram-sha-256", db, user)
}

// hbaQuote is a role or database name as a pg_hba.conf field: quoted, so
// that it is never read as a keyword (all, sameuser, replication, ...) or
// a group (+name); SetupNames keeps '"' and blanks out of role names.
func hbaQuote(name string) string { return `"` + name + `"` }

// HBADatabase is the database field of the printed pg_hba.conf line: the
// name as it is when it is a plain lower-case name that is no keyword, else
// quoted (a '"' in it cannot be written in pg_hba.conf: a placeholder then).
func HBADatabase(db string) string {
	switch {
	case strings.ContainsAny(db, "\"\n\r"):
		return "<database>"
	case regexp.MustCompile(`^[a-z_][a-z0-9_]*$`).MatchString(db) && !slices.Contains([]string{"all", "sameuser", "samerole", "samegroup", "replication"}, db):
		return db
	}
	return hbaQuote(db)
}

// CommandConn is the PostgreSQL connection of a one-shot command (setup,
// status): the catalog reads and the statements it runs.
type CommandConn struct{ conn *pgx.Conn }

// OpenCommandConn connects to connString. Its error is the driver's, as it
// is, for the caller to classify (a refused login, a missing database).
func OpenCommandConn(ctx context.Context, connString string) (*CommandConn, error) {
	conn, err := replication.ConnectSQL(ctx, connString)
	if err != nil {
		return nil, err
	}
	return &CommandConn{conn: conn}, nil
}

// Close closes the connection.
func (c *CommandConn) Close() { c.conn.Close(context.Background()) }

// Database is the connection's database.
func (c *CommandConn) Database(ctx context.Context) (string, error) {
	var db string
	err := c.conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db)
	return db, err
}

// ServerVersion is the server's server_version_num (170000 for 17.0).
func (c *CommandConn) ServerVersion(ctx context.Context) (int, error) {
	var version int
	if err := c.conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return 0, fmt.Errorf("read server version: %w", err)
	}
	return version, nil
}

// SlotExists reports whether the slot exists.
func (c *CommandConn) SlotExists(ctx context.Context, slot string) (bool, error) {
	var n int
	if err := c.conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// run runs s: when s.Exists finds the object, s.IfExists instead, or
// nothing. It returns the statement it ran ("" when none).
func (c *CommandConn) run(ctx context.Context, s SetupStatement) (string, error) {
	if s.Exists != "" {
		var one int
		if err := c.conn.QueryRow(ctx, s.Exists, s.ExistsArg).Scan(&one); err == nil {
			if s.IfExists == "" {
				return "", nil
			}
			s.SQL = s.IfExists
		}
	}
	_, err := c.conn.Exec(ctx, s.SQL)
	return s.SQL, err
}

// SlotGoneError is a slot walrelay streamed from (History has its record)
// that no longer exists: setup does not create it again.
type SlotGoneError struct {
	Slot, Database, System string
	Confirmed              pglogrepl.LSN
	At                     time.Time
}

func (e *SlotGoneError) Error() string {
	return fmt.Sprintf("replication slot gone: slot %q of database %q on system %s was last confirmed at %s (recorded %s) and no longer exists: setup does not create it again, which would skip the events committed since (see docs/failover.md); pass --recreate-missing-slot to create it and accept the gap",
		e.Slot, e.Database, e.System, e.Confirmed, e.At.UTC().Format(time.RFC3339))
}

// CheckSlotGone looks up in h the slot rc.Slot of database db, which does
// not exist: a *SlotGoneError when walrelay streamed from it, nil when h
// has no record of it.
func CheckSlotGone(ctx context.Context, rc replication.Config, db string, h replication.History) error {
	sys, err := SystemID(ctx, rc)
	if err != nil {
		return fmt.Errorf("read the system identifier, to look for the slot's marker: %w", err)
	}
	lsn, at, found, err := h.LastConfirmed(ctx, sys, db, rc.Slot)
	if err != nil {
		return fmt.Errorf("read the slot's marker: %w", err)
	}
	if !found {
		return nil
	}
	return &SlotGoneError{Slot: rc.Slot, Database: db, System: sys, Confirmed: lsn, At: at}
}
