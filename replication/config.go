package replication

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/pgoutput"
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

// FailoverMode says whether the slot is a failover slot (PostgreSQL 17+:
// synchronized to a physical standby with sync_replication_slots, so that a
// promotion keeps it).
type FailoverMode string

const (
	// FailoverAuto is the default: a failover slot on 17 and newer, an
	// ordinary one on older servers (which have no failover slots).
	FailoverAuto FailoverMode = ""
	// FailoverOn asks for a failover slot; a server older than 17 is refused.
	FailoverOn FailoverMode = "on"
	// FailoverOff keeps (and creates) an ordinary slot.
	FailoverOff FailoverMode = "off"
)

// IsBoolFlag, String and Set make a FailoverMode the flag --slot-failover:
// unset (auto), true or false; a bare --slot-failover is true.
func (m *FailoverMode) IsBoolFlag() bool { return true }

func (m *FailoverMode) String() string {
	switch *m {
	case FailoverOn:
		return "true"
	case FailoverOff:
		return "false"
	}
	return "auto"
}

func (m *FailoverMode) Set(s string) error {
	switch strings.ToLower(s) {
	case "auto", "":
		*m = FailoverAuto
	case "true", "1", "on", "t":
		*m = FailoverOn
	case "false", "0", "off", "f":
		*m = FailoverOff
	default:
		return fmt.Errorf("want true, false or auto")
	}
	return nil
}

// History is where walrelay remembers the slots it has streamed from, so that
// a slot that disappeared is never taken for a new one. The pipeline keeps it
// (a marker record on a compacted Kafka topic); pgcatalog.Prepare only reads it.
type History interface {
	// LastConfirmed returns the position last recorded for the slot of
	// database on the system (IDENTIFY_SYSTEM's systemid), when it was
	// recorded, and whether there is a record.
	// An implementation may answer from what it wrote or read before.
	LastConfirmed(ctx context.Context, system, database, slot string) (lsn pglogrepl.LSN, at time.Time, found bool, err error)
	// LastConfirmedNow is LastConfirmed read where the record is kept,
	// never from memory: before an existing slot is streamed from, whether
	// a recovery of it has begun since (an error wrapping
	// ErrRecoveryUnfinished) must be known as of now.
	LastConfirmedNow(ctx context.Context, system, database, slot string) (lsn pglogrepl.LSN, at time.Time, found bool, err error)
}

// RegisterFlags binds c's fields to walrelay's flags, with the command
// line's defaults and help: the help texts are the manual's (the release
// test compares them with the previous release's).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConnString, "pg-url", "", "PostgreSQL connection string (URL or key=value); the replication connection is derived from it")
	fs.StringVar(&c.Publication, "publication", "walrelay", "publication to stream")
	fs.StringVar(&c.Slot, "slot", "walrelay", "logical replication slot (pgoutput)")
	cli.BoolVar(fs, &c.Create, "create", true, "create the publication (FOR TABLE ... WITH (publish = 'insert', publish_via_partition_root = true)) and the slot when missing")
	cli.DurationVar(fs, &c.StatusInterval, "status-interval", 10*time.Second, "longest time between two status updates to PostgreSQL: 100ms or more, below half of the server's wal_sender_timeout (0 is refused)")
	cli.DurationVar(fs, &c.ReadWait, "pg-read-wait", time.Millisecond, "after a read that empties the replication socket, wait this long before the next, so a backlog arrives in large reads (less CPU for walrelay and the walsender; adds at most this latency), while messages come at 6 or more per wait (over 100 ms); a quieter stream is read at once, and so is a Unix socket; while a backlog drains over a short TCP path the wait follows a fixed 64 KiB receive buffer instead (0.25-8ms, docs/performance.md); 0: always read at once")
	cli.DurationVar(fs, &c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long to wait for outstanding Kafka acknowledgements (more than 0; a second signal stops at once)")
	cli.SizeVar(fs, &c.MaxMessageBytes, "pg-max-message-bytes", DefaultMaxMessageBytes, "largest replication message accepted from PostgreSQL, i.e. one outbox row with all its columns; a larger row stops walrelay (exit 2) before it is read, and receiving one costs about twice its size in memory")
	cli.BoolVar(fs, &c.RecreateLostSlot, "recreate-lost-slot", false, "DROP and re-create the slot if PostgreSQL invalidated it (wal_status lost): events committed while it was behind are LOST and never relayed")
	fs.Var(&c.SlotFailover, "slot-failover", "create the slot as a failover slot, synchronized to standbys with sync_replication_slots, and make an existing one such a slot before streaming (PostgreSQL 17+; auto: on 17+, off before; true on an older server is refused)")
	cli.BoolVar(fs, &c.RecreateMissingSlot, "recreate-missing-slot", false, "create the slot again when it is missing although walrelay streamed from it (dropped, or lost in a failover): events committed since its last confirmed position are LOST; use once, after deciding to accept that gap")
	cli.BoolVar(fs, &c.RequireVerifiedTLS, "pg-require-verified-tls", true, "refuse to start (exit 2) when a PostgreSQL host other than loopback (localhost, 127.0.0.0/8, ::1, a socket) is not reached with sslmode=verify-full, in --pg-url and --pg-standby-url; false: connect anyway and log a warning")
}
