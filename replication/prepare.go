package replication

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/pgoutput"
	"github.com/walrelay/walrelay/internal/preflight"
)

// Config names the slot and publication to stream. Zero values mean the
// defaults named.
type Config struct {
	// ConnString is the PostgreSQL connection string (URL or key=value); the
	// replication connection is derived from it.
	ConnString string
	// Slot is the logical replication slot (pgoutput). Default "walrelay".
	Slot string
	// Publication is the publication streamed. Default "walrelay".
	Publication string
	// Tables are the outbox tables the publication must contain, schema
	// qualified. Default public.outbox.
	Tables []string
	// Columns are the outbox columns walrelay maps (id, key, payload,
	// header and topic template columns): a publication's column list must
	// keep each. Default none.
	Columns []string
	// Create creates a missing publication and slot. Without it their
	// absence is an error.
	Create bool
	// StatusInterval is the longest time between two status updates.
	// Default 10s; it must stay well below the server's wal_sender_timeout.
	StatusInterval time.Duration
	// ShutdownTimeout bounds a graceful stop. Default 30s.
	ShutdownTimeout time.Duration
	// RecreateLostSlot drops and re-creates a slot whose WAL was removed
	// (wal_status lost). Events written while it was behind are lost; without
	// it such a slot is an error (ErrSlotLost).
	RecreateLostSlot bool
	// MaxMessageBytes is the largest replication protocol message accepted:
	// each carries one row of an outbox table with all its columns (or one
	// table's description). A larger one stops the stream with an error
	// wrapping ErrSetup instead of being read into memory. Default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// ReadWait is how long the stream waits before reading again after a
	// read that emptied the socket, so that a draining backlog arrives in
	// large reads (see coalescingConn). Zero reads at once.
	ReadWait time.Duration
	// SlotFailover says whether the slot is a failover slot. Default
	// FailoverAuto: one on PostgreSQL 17 and newer.
	SlotFailover FailoverMode
	// History remembers the slots walrelay streamed from: a missing slot
	// it has a record of is never created again (ErrSlotGone) unless
	// RecreateMissingSlot. Default nil: every missing slot is new.
	History History
	// RecreateMissingSlot creates a slot History has a record of. Events
	// committed since the recorded position are lost; it is logged.
	RecreateMissingSlot bool
	// RequireVerifiedTLS refuses (Validate) a connection string that
	// reaches a host other than loopback below sslmode=verify-full; without
	// it such a host is warned about. Default false: the zero Config of
	// the tests; walrelay's --pg-require-verified-tls is on by default.
	RequireVerifiedTLS bool
	// Messages requests the logical decoding messages (pgoutput's
	// messages option, PostgreSQL 14+): the message source. Default false.
	Messages bool
	// NoTables: the message source alone. No outbox table need exist or
	// be published; the publication must exist all the same (pgoutput
	// requires one), and is created empty. Tables is ignored. Default
	// false.
	NoTables bool
}

// DefaultMaxMessageBytes is MaxMessageBytes' default, 64 MiB: 64 times the
// largest record Kafka accepts by default, so only a row that is mostly
// unmapped columns reaches it; receiving one costs about twice its size in
// memory (the connection's read buffer and walrelay's copy).
const DefaultMaxMessageBytes = 64 << 20

// MinMaxMessageBytes and MaxMaxMessageBytes bound MaxMessageBytes: a table
// description of many columns needs tens of KiB, and PostgreSQL sends no
// message above 1 GiB.
const (
	MinMaxMessageBytes = 64 << 10
	MaxMaxMessageBytes = 1 << 30
)

var nameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateName refuses a slot or publication name (what names it, e.g.
// "slot") that is not 1-63 lower-case letters, digits and underscores, not
// starting with a digit: a slot takes no other name, and a publication's
// name is written unquoted into publication_names and SQL.
func ValidateName(what, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%s %q: use 1-63 lower-case letters, digits and underscores, not starting with a digit", what, name)
	}
	return nil
}

// ValidateTableName refuses an outbox table name PostgreSQL would not take
// as it is: an empty, over-long (PostgreSQL truncates names to 63 bytes, and
// the Relation messages would then name another table) or control-character
// part. Each part is otherwise any name, quoted wherever walrelay writes it.
func ValidateTableName(t string) error {
	s, n, err := pgoutput.SplitTable(t)
	if err != nil {
		return err
	}
	for _, part := range []string{s, n} {
		bad := len(part) > 63 || !utf8.ValidString(part) || strings.ContainsFunc(part, unicode.IsControl)
		if bad {
			return fmt.Errorf("table %q: each of schema and table is 1-63 bytes of UTF-8 without control characters, as the catalog spells it (case matters, no quotes)", t)
		}
	}
	return nil
}

// WithDefaults returns c with every zero field set to its default: the
// values the stages use.
func (c Config) WithDefaults() Config {
	if c.Slot == "" {
		c.Slot = "walrelay"
	}
	if c.Publication == "" {
		c.Publication = "walrelay"
	}
	if len(c.Tables) == 0 {
		c.Tables = []string{"public.outbox"}
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = 10 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.ConnString == "" {
		errs = append(errs, errors.New("no PostgreSQL connection string: set --pg-url or WALRELAY_PG_URL"))
	} else if _, err := pgconn.ParseConfig(c.ConnString); err != nil {
		errs = append(errs, fmt.Errorf("PostgreSQL connection string: %s", redactErr(err)))
	} else if _, _, err := TLSPolicy("--pg-url", c.ConnString, c.RequireVerifiedTLS); err != nil {
		errs = append(errs, err)
	}
	for _, t := range c.Tables {
		if err := ValidateTableName(t); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ValidateName("slot", c.Slot); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateName("publication", c.Publication); err != nil {
		errs = append(errs, err)
	}
	if c.StatusInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--status-interval %s: want 100ms or more (default 10s), below half of the server's wal_sender_timeout", c.StatusInterval))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: want more than 0 (default 30s)", c.ShutdownTimeout))
	}
	if c.MaxMessageBytes < MinMaxMessageBytes || c.MaxMessageBytes > MaxMaxMessageBytes {
		errs = append(errs, fmt.Errorf("--pg-max-message-bytes %d: want %d to %d (default %d)", c.MaxMessageBytes, MinMaxMessageBytes, MaxMaxMessageBytes, DefaultMaxMessageBytes))
	}
	if c.SlotFailover != FailoverAuto && c.SlotFailover != FailoverOn && c.SlotFailover != FailoverOff {
		errs = append(errs, fmt.Errorf("--slot-failover %q: want true, false or auto (default: true on PostgreSQL 17+)", c.SlotFailover))
	}
	if c.ReadWait < 0 || c.ReadWait > 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--pg-read-wait %s: want 0 (read at once) to 100ms", c.ReadWait))
	}
	return errors.Join(errs...)
}

// redactErr renders a connection-string parse error without the string
// itself, which may hold a password.
func redactErr(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap().Error()
	}
	if errors.As(err, &pe) {
		return "cannot parse"
	}
	return err.Error()
}

// ErrSetup is wrapped by errors that a person must fix in PostgreSQL's
// setup or walrelay's flags; retrying does not help.
var ErrSetup = errors.New("setup")

// ErrSlotLost is wrapped when the slot was invalidated (wal_status lost):
// the WAL it needed is gone and events may have been lost.
var ErrSlotLost = errors.New("replication slot lost")

// ErrSlotInUse is wrapped when another process streams the slot.
var ErrSlotInUse = errors.New("replication slot in use")

// ErrSlotNotReady is wrapped when the slot exists but another session is
// still creating it (no confirmed_flush_lsn yet): wait and try again.
var ErrSlotNotReady = errors.New("replication slot not ready")

type setupError struct{ msg string }

func (e *setupError) Error() string        { return e.msg }
func (e *setupError) Is(target error) bool { return target == ErrSetup }

func setupErrorf(format string, args ...any) error {
	return &setupError{msg: fmt.Sprintf(format, args...)}
}

// SlotState is what Prepare found.
type SlotState struct {
	// ConfirmedFlush is the slot's confirmed_flush_lsn: where streaming
	// starts and the watermark begins.
	ConfirmedFlush pglogrepl.LSN
	WALStatus      string
	Created        bool
	// WALSenderTimeout is the server's wal_sender_timeout (0: disabled).
	WALSenderTimeout time.Duration
	// ServerVersion is server_version_num.
	ServerVersion int
	// SystemID is IDENTIFY_SYSTEM's systemid, Database the slot's
	// database: with the slot's name they name History's record.
	SystemID, Database string
	// Exists: the slot existed (or, in a dry run, exists).
	Exists bool
	// Failover and Synced are pg_replication_slots' columns (17+): a
	// failover slot; a slot synchronized from a primary (on a promoted
	// standby it stays true).
	Failover, Synced bool
	// Recorded is History's last recorded position of the slot, 0 when
	// History has none.
	Recorded pglogrepl.LSN
}

// Prepare checks the server, the publication and the slot, creating the
// latter two when cfg.Create allows.
func Prepare(ctx context.Context, cfg Config, log *zap.Logger) (SlotState, error) {
	p, err := newPrep(ctx, cfg, log, false)
	if err != nil {
		return SlotState{}, err
	}
	defer p.conn.Close(context.WithoutCancel(ctx))
	for _, step := range p.steps() {
		if _, err := step.run(ctx); err != nil {
			return p.st, err
		}
	}
	return p.st, nil
}

// Check is the outcome of one preflight check.
type Check = preflight.Check

// Preflight runs every check of Prepare without creating anything.
func Preflight(ctx context.Context, cfg Config, log *zap.Logger) []Check {
	p, err := newPrep(ctx, cfg, log, true)
	if err != nil {
		return []Check{{Name: "connect to PostgreSQL", Err: err}}
	}
	defer p.conn.Close(context.WithoutCancel(ctx))
	checks := []Check{{Name: "connect to PostgreSQL", Note: fmt.Sprintf("database %q as role %q", p.db, p.user)}}
	for _, step := range p.steps() {
		p.warnings = nil
		note, err := step.run(ctx)
		checks = append(checks, Check{Name: step.name, Err: err, Note: note, Warnings: p.warnings})
	}
	return checks
}

// prep is one run of the setup checks over one connection.
type prep struct {
	conn     *pgx.Conn
	cfg      Config
	log      *zap.Logger
	dryRun   bool
	db, user string
	st       SlotState
	warnings []string // the current step's (Check.Warnings)
}

type step struct {
	name string
	run  func(context.Context) (note string, err error)
}

func newPrep(ctx context.Context, cfg Config, log *zap.Logger, dryRun bool) (*prep, error) {
	cfg = cfg.WithDefaults()
	conn, err := pgx.Connect(ctx, cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	p := &prep{conn: conn, cfg: cfg, log: log.Named("replication"), dryRun: dryRun}
	if err := conn.QueryRow(ctx, `SELECT current_user, current_database()`).Scan(&p.user, &p.db); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("read current user: %w", err)
	}
	return p, nil
}

func (p *prep) steps() []step {
	return []step{
		{"PostgreSQL TLS", p.tls},
		{"server version is supported", p.serverVersion},
		{"wal_level is logical", p.walLevel},
		{"role may replicate", p.role},
		{"system identifier", p.identify},
		{"status interval fits wal_sender_timeout", p.senderTimeout},
		{"outbox tables exist", p.tables},
		{"publication", p.publication},
		{"replication slot", p.slot},
		{"failover readiness", p.failover},
	}
}

// The PostgreSQL versions walrelay supports: those the test bed's matrix
// (make matrix) proves it on, 14 to 18, as server_version_num.
const (
	minServerVersionNum    = 140000
	beyondTestedVersionNum = 190000
	// N.B. pgoutput's messages option is PostgreSQL 14's: the message
	// source is refused before it, whatever the oldest version supported.
	minMessagesVersionNum = 140000
)

func (p *prep) serverVersion(ctx context.Context) (string, error) {
	var num int
	var version string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &version); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	p.st.ServerVersion = num
	note, untested, err := checkServerVersion(num, version)
	if err == nil && p.cfg.Messages {
		err = checkMessagesVersion(num, version)
	}
	if untested {
		p.log.Warn("PostgreSQL is newer than the versions walrelay was tested on (14 to 18)", zap.String("server_version", version))
	}
	return note, err
}

// checkServerVersion refuses a server older than 14 and reports one newer
// than 18 as untested.
//
// N.B. a newer server is warned about, not refused: pgoutput's protocol
// version 1 is kept by every release, and refusing would stop the relay at
// the first PostgreSQL upgrade. An older one is refused: no test ran there
// (13 is past its end of life).
func checkServerVersion(num int, version string) (note string, untested bool, err error) {
	switch {
	case num < minServerVersionNum:
		return "", false, setupErrorf("PostgreSQL %s is not supported: walrelay needs PostgreSQL 14 or later (tested on 14 to 18): upgrade the server", version)
	case num >= beyondTestedVersionNum:
		return fmt.Sprintf("PostgreSQL %s: newer than the versions walrelay was tested on (14 to 18)", version), true, nil
	}
	return "PostgreSQL " + version, false, nil
}

// checkMessagesVersion refuses the message source before PostgreSQL 14,
// whose pgoutput has no messages option.
func checkMessagesVersion(num int, version string) error {
	if num < minMessagesVersionNum {
		return setupErrorf("PostgreSQL %s cannot stream logical decoding messages: --source messages needs pgoutput's messages option, PostgreSQL 14 or later: upgrade the server, or use --source tables with an outbox table", version)
	}
	return nil
}

func (p *prep) walLevel(ctx context.Context) (string, error) {
	var walLevel string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&walLevel); err != nil {
		return "", fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return "", setupErrorf("wal_level is %q; logical decoding needs wal_level = logical: run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL", walLevel)
	}
	return "", nil
}

func (p *prep) role(ctx context.Context) (string, error) {
	var canReplicate bool
	if err := p.conn.QueryRow(ctx, `SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&canReplicate); err != nil {
		return "", fmt.Errorf("read role: %w", err)
	}
	if !canReplicate {
		return "", setupErrorf("role %q lacks the REPLICATION attribute: run ALTER ROLE %s WITH REPLICATION; as a superuser", p.user, pgx.Identifier{p.user}.Sanitize())
	}
	return "", nil
}

func (p *prep) senderTimeout(ctx context.Context) (string, error) {
	var senderTimeout string
	if err := p.conn.QueryRow(ctx, `SELECT current_setting('wal_sender_timeout')`).Scan(&senderTimeout); err != nil {
		return "", fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	p.st.WALSenderTimeout = parsePGDuration(senderTimeout)
	if p.st.WALSenderTimeout > 0 && p.cfg.StatusInterval >= p.st.WALSenderTimeout/2 {
		return "", setupErrorf("status interval %s is not below half of the server's wal_sender_timeout (%s): lower --status-interval", p.cfg.StatusInterval, p.st.WALSenderTimeout)
	}
	return fmt.Sprintf("wal_sender_timeout %s, status interval %s", senderTimeout, p.cfg.StatusInterval), nil
}

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
		return "", setupErrorf("outbox table %s does not exist in database %q: create it (see the README's outbox table) or fix --table", strings.Join(missing, ", "), p.db)
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return strings.Join(p.cfg.Tables, ", "), nil
}

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
		p.cfg.Publication, quoteTables(p.cfg.pubTables())).Scan(&exists, &mayCreate, &notOwned)
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
		p.user, p.cfg.Publication, strings.Join(lacks, " and "), CreatePublicationSQL(p.cfg.Publication, p.cfg.pubTables()))
}

// pubTables are the tables the publication must list: none for the
// message source alone.
func (c Config) pubTables() []string {
	if c.NoTables {
		return nil
	}
	return c.Tables
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
func publicationWarnings(ctx context.Context, conn *pgx.Conn, cfg Config) ([]string, error) {
	var allTables, update, del, truncate bool
	err := conn.QueryRow(ctx, `SELECT puballtables, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1`,
		cfg.Publication).Scan(&allTables, &update, &del, &truncate)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // missing: created as walrelay needs it
	}
	if err != nil {
		return nil, fmt.Errorf("look up publication: %w", err)
	}
	pub := pgx.Identifier{cfg.Publication}.Sanitize()
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

func (p *prep) identify(ctx context.Context) (string, error) {
	sys, err := identify(ctx, p.cfg)
	if err != nil {
		return "", err
	}
	p.st.SystemID, p.st.Database = sys, p.db
	return sys, nil
}

func (p *prep) slot(ctx context.Context) (string, error) {
	err := p.prepareSlot(ctx)
	st := p.st
	if errors.Is(err, ErrSlotNotReady) && p.dryRun {
		return "being created by another session (no confirmed_flush_lsn yet): run waits until it is ready", nil
	}
	if err != nil {
		return "", err
	}
	if st.Created && p.dryRun {
		return "missing: will be created at start (--create)", nil
	}
	return fmt.Sprintf("confirmed_flush_lsn %s, wal_status %s", st.ConfirmedFlush, st.WALStatus), nil
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
		return "CREATE PUBLICATION " + pgx.Identifier{publication}.Sanitize()
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = quoteTable(t)
	}
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert', publish_via_partition_root = true)",
		pgx.Identifier{publication}.Sanitize(), strings.Join(quoted, ", "))
}

func preparePublication(ctx context.Context, conn *pgx.Conn, cfg Config, log *zap.Logger, dryRun bool) (string, error) {
	var pubOID uint32
	var pubInsert, pubViaRoot, allTables bool
	err := conn.QueryRow(ctx, `SELECT oid, pubinsert, pubviaroot, puballtables FROM pg_publication WHERE pubname = $1`,
		cfg.Publication).Scan(&pubOID, &pubInsert, &pubViaRoot, &allTables)
	if errors.Is(err, pgx.ErrNoRows) {
		sql := CreatePublicationSQL(cfg.Publication, cfg.pubTables())
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
		log.Info("created publication", zap.String("publication", cfg.Publication), zap.Strings("tables", cfg.pubTables()))
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
	pub := pgx.Identifier{cfg.Publication}.Sanitize()
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
			if !errors.Is(err, ErrSetup) {
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

// prepareSlot reads the slot into p.st, creating it when it is missing and
// new, and making it a failover slot when asked.
func (p *prep) prepareSlot(ctx context.Context) error {
	cfg, log := p.cfg, p.log
	wantFailover, err := cfg.SlotFailover.want(p.st.ServerVersion)
	if err != nil && !p.dryRun {
		return err // a dry run reports it in "failover readiness"
	}
	cols := `plugin, slot_type, database, wal_status, confirmed_flush_lsn::text, active_pid, false, false`
	if p.st.ServerVersion >= failoverVersionNum {
		cols = `plugin, slot_type, database, wal_status, confirmed_flush_lsn::text, active_pid, failover, synced`
	}
	var plugin, slotType, slotDB, walStatus *string
	var confirmed *pglogrepl.LSN
	var activePID *int32
	err = p.conn.QueryRow(ctx, `SELECT `+cols+` FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).
		Scan(&plugin, &slotType, &slotDB, &walStatus, &confirmed, &activePID, &p.st.Failover, &p.st.Synced)
	if errors.Is(err, pgx.ErrNoRows) {
		return p.missingSlot(ctx, wantFailover)
	}
	if err != nil {
		return fmt.Errorf("look up replication slot: %w", err)
	}
	p.st.Exists = true
	if deref(slotType) != "logical" || deref(plugin) != "pgoutput" {
		return setupErrorf("replication slot %q uses %s plugin %q, walrelay needs a logical pgoutput slot: drop it (SELECT pg_drop_replication_slot('%s');) or choose another --slot",
			cfg.Slot, deref(slotType), deref(plugin), cfg.Slot)
	}
	if deref(slotDB) != p.db {
		return setupErrorf("replication slot %q belongs to database %q, not %q: connect to that database or choose another --slot", cfg.Slot, deref(slotDB), p.db)
	}
	p.st.WALStatus = deref(walStatus)
	// N.B. only wal_status lost means lost. A slot without
	// confirmed_flush_lsn is being created by another session, waiting for
	// its consistent point (it ends once the transactions running then have
	// ended): it is not ready, never dropped, and waited for.
	if p.st.WALStatus != "lost" && confirmed == nil {
		holder := "another session"
		if activePID != nil {
			holder = fmt.Sprintf("the session of pid %d", *activePID)
		}
		return fmt.Errorf("%w: slot %q is being created by %s and has no confirmed_flush_lsn yet: PostgreSQL is waiting for the transactions running when its creation began to end", ErrSlotNotReady, cfg.Slot, holder)
	}
	if p.st.WALStatus == "lost" && cfg.RecreateLostSlot && !p.dryRun {
		log.Error("replication slot lost: dropping and re-creating it as --recreate-lost-slot asks; events committed while the slot was behind were NOT relayed",
			zap.String("slot", cfg.Slot), zap.String("wal_status", p.st.WALStatus))
		if _, err := p.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, cfg.Slot); err != nil {
			return fmt.Errorf("drop lost replication slot: %w", err)
		}
		return p.createSlot(ctx, wantFailover)
	}
	if p.st.WALStatus == "lost" {
		return fmt.Errorf("%w: slot %q has wal_status %q: PostgreSQL removed WAL it still needed (max_slot_wal_keep_size), so events written while walrelay was behind are gone; start once with --recreate-lost-slot to drop and re-create it (see the README's \"Slot lost\" section)", ErrSlotLost, cfg.Slot, p.st.WALStatus)
	}
	p.st.ConfirmedFlush = *confirmed
	// N.B. ALTER_REPLICATION_SLOT works only while no one holds the slot:
	// before streaming, never while another instance streams it (that
	// instance, or this one once it takes over, does it).
	if wantFailover && !p.st.Failover && !p.dryRun && activePID == nil {
		switch err := alterFailover(ctx, cfg); {
		case errors.Is(err, ErrSlotInUse):
		case err != nil:
			return err
		default:
			p.st.Failover = true
			log.Info("made the replication slot a failover slot", zap.String("slot", cfg.Slot))
		}
	}
	if cfg.History != nil && p.st.SystemID != "" {
		rec, _, found, err := cfg.History.LastConfirmed(ctx, p.st.SystemID, p.db, cfg.Slot)
		if err != nil {
			return fmt.Errorf("read slot history: %w", err)
		}
		if found {
			p.st.Recorded = rec
		}
		// N.B. a slot synchronized to a standby lags the primary's: after a
		// promotion it may be behind what walrelay confirmed there.
		// Streaming starts from the slot's position all the same: the
		// events between are relayed again (duplicates), none is skipped.
		if found && rec > p.st.ConfirmedFlush && !p.dryRun {
			log.Warn("the slot is behind the position walrelay confirmed on it before (a standby promoted with a synchronized slot lags the old primary): resuming from the slot; events between are sent again",
				zap.String("slot", cfg.Slot), zap.Stringer("lsn", p.st.ConfirmedFlush), zap.Stringer("recorded_lsn", rec),
				zap.Uint64("behind_bytes", uint64(rec-p.st.ConfirmedFlush)), zap.Bool("synced", p.st.Synced))
		}
	}
	return nil
}

// missingSlot handles a slot that does not exist: created when it is new
// (History has no record of it) and cfg.Create allows; a slot walrelay
// streamed from is never created again without RecreateMissingSlot.
func (p *prep) missingSlot(ctx context.Context, wantFailover bool) error {
	cfg := p.cfg
	if cfg.History != nil && p.st.SystemID != "" {
		rec, at, found, err := cfg.History.LastConfirmed(ctx, p.st.SystemID, p.db, cfg.Slot)
		if err != nil {
			return fmt.Errorf("read slot history: %w", err)
		}
		// N.B. the one decision this protects: a slot created now starts
		// at the server's current WAL position, so every event committed
		// since the slot's last confirmed position would be skipped
		// without a trace.
		if found && !cfg.RecreateMissingSlot {
			return &slotGoneError{msg: fmt.Sprintf("replication slot gone: slot %q of database %q on system %s was last confirmed at %s (recorded %s) and no longer exists: it was dropped, or the server was failed over to a standby without a synchronized failover slot (PostgreSQL 17+, see the README's \"Failover\"). walrelay does not create it again: that would skip the events committed since %s. Either point walrelay at the server that still has the slot (or a promoted standby with the synchronized slot), or start once with --recreate-missing-slot to create a new slot and accept the gap",
				cfg.Slot, p.db, p.st.SystemID, rec, at.UTC().Format(time.RFC3339), rec)}
		}
		if found && p.dryRun {
			p.st.Created = true
			return nil
		}
		if found {
			p.log.Error("replication slot gone: creating it again as --recreate-missing-slot asks; events committed since the recorded position are NOT relayed",
				zap.String("slot", cfg.Slot), zap.String("system_identifier", p.st.SystemID), zap.Stringer("recorded_lsn", rec))
			if err := p.createSlot(ctx, wantFailover); err != nil {
				return err
			}
			p.log.Error("gap: events committed between these positions were not relayed",
				zap.String("slot", cfg.Slot), zap.Stringer("recorded_lsn", rec), zap.Stringer("lsn", p.st.ConfirmedFlush))
			return nil
		}
	}
	if !cfg.Create {
		return setupErrorf("replication slot %q does not exist: run %s; or start with --create", cfg.Slot, CreateSlotSQL(cfg.Slot, wantFailover))
	}
	if p.dryRun {
		p.st.Created = true
		return nil
	}
	return p.createSlot(ctx, wantFailover)
}

// CreateSlotSQL is the statement that creates slot, a failover slot when
// failover is set (PostgreSQL 17+).
func CreateSlotSQL(slot string, failover bool) string {
	if failover {
		return fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, false, true);", quoteLiteral(slot))
	}
	return fmt.Sprintf("SELECT pg_create_logical_replication_slot(%s, 'pgoutput');", quoteLiteral(slot))
}

func (p *prep) createSlot(ctx context.Context, failover bool) error {
	// N.B. pg_create_logical_replication_slot(name, plugin, temporary,
	// twophase, failover) on 17+: a failover slot is synchronized to the
	// standbys that set sync_replication_slots.
	query := `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`
	if failover {
		query = `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`
	}
	var lsn pglogrepl.LSN
	if err := p.conn.QueryRow(ctx, query, p.cfg.Slot).Scan(&lsn); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created concurrently
			return p.prepareSlot(ctx)
		}
		return fmt.Errorf("create replication slot: %w", err)
	}
	p.log.Info("created replication slot", zap.String("slot", p.cfg.Slot), zap.Stringer("lsn", lsn), zap.Bool("failover", failover))
	p.st.ConfirmedFlush, p.st.Created, p.st.WALStatus, p.st.Exists, p.st.Failover = lsn, true, "reserved", true, failover
	return nil
}

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

func quoteTables(tables []string) []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = quoteTable(t)
	}
	return out
}

func quoteTable(t string) string {
	s, n := splitTable(t)
	return pgx.Identifier{s, n}.Sanitize()
}

// parsePGDuration reads a duration setting as current_setting shows it
// ("60s", "1min", "500ms", "0").
func parsePGDuration(s string) time.Duration {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			var v int64
			if _, err := fmt.Sscan(n, &v); err == nil {
				return time.Duration(v) * u.unit
			}
		}
	}
	var v int64
	if _, err := fmt.Sscan(s, &v); err == nil {
		return time.Duration(v) * time.Millisecond
	}
	return 0
}

// SlotStatus is a slot's row of pg_replication_slots with the server's WAL
// position.
type SlotStatus struct {
	Exists      bool
	Active      bool
	WALStatus   string
	LagBytes    int64 // pg_current_wal_lsn() - confirmed_flush_lsn
	SafeWALSize *int64
	Confirmed   pglogrepl.LSN
	// ServerVersion is server_version_num. Failover, Synced and
	// StandbySlots (synchronized_standby_slots) are read on 17+ only.
	ServerVersion    int
	Failover, Synced bool
	StandbySlots     string
}

// QuerySlot reads a slot's status through a normal connection.
func QuerySlot(ctx context.Context, conn *pgx.Conn, slot string) (SlotStatus, error) {
	var st SlotStatus
	var walStatus *string
	var lag *int64
	var confirmed *string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&st.ServerVersion); err != nil {
		return st, fmt.Errorf("read server version: %w", err)
	}
	cols := `false, false, ''`
	if st.ServerVersion >= failoverVersionNum {
		cols = `failover, synced, current_setting('synchronized_standby_slots')`
	}
	err := conn.QueryRow(ctx, `SELECT active, wal_status, (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, safe_wal_size, confirmed_flush_lsn::text, `+cols+`
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&st.Active, &walStatus, &lag, &st.SafeWALSize, &confirmed, &st.Failover, &st.Synced, &st.StandbySlots)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read slot %s: %w", slot, err)
	}
	st.Exists = true
	st.WALStatus = deref(walStatus)
	if lag != nil {
		st.LagBytes = *lag
	}
	if confirmed != nil {
		st.Confirmed, _ = pglogrepl.ParseLSN(*confirmed)
	}
	return st, nil
}

// quoteLiteral is s as an SQL string literal (standard_conforming_strings).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
