package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// queryTimeout bounds each helper's round trip; the helpers use a background
// context so that they also work in t.Cleanup, after t.Context is canceled.
const queryTimeout = 60 * time.Second

// WithDatabase returns dsn (URL or key=value form) naming database db instead.
func WithDatabase(dsn, db string) (string, error) {
	return withParam(dsn, "dbname", db)
}

// ReplicationDSN returns dsn with replication=database, for a logical
// replication connection (pgconn.Connect, pglogrepl).
func ReplicationDSN(dsn string) string {
	s, err := withParam(dsn, "replication", "database")
	if err != nil {
		return dsn + " replication=database"
	}
	return s
}

func withParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse DSN: %w", err)
		}
		if key == "dbname" {
			u.Path = "/" + value
			u.RawPath = ""
		} else {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// key=value form: a later setting wins.
	return fmt.Sprintf("%s %s='%s'", dsn, key, strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value)), nil
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates a database for the test (named t_<test name>_<random>)
// and returns a superuser DSN for it. At cleanup it drops it
// (DropDatabase).
func (b *Bed) NewDatabase(t testing.TB) string {
	t.Helper()
	name := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = "t_" + strings.Trim(name, "_") + "_" + randomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	dsn, err := CreateDatabase(ctx, b.pgURL, name)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := DropDatabase(context.Background(), b.pgURL, name); err != nil {
			t.Errorf("testbed: %v", err)
		}
	})
	return dsn
}

// CreateDatabase creates database name on the server of adminDSN and
// returns adminDSN naming it.
func CreateDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	if err := Exec(ctx, adminDSN, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return WithDatabase(adminDSN, name)
}

// FreshDatabase drops database name if it exists (DropDatabase) and
// creates it again (CreateDatabase).
func FreshDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	if err := DropDatabase(ctx, adminDSN, name); err != nil {
		return "", err
	}
	return CreateDatabase(ctx, adminDSN, name)
}

// DropDatabase drops database name, if it exists, on the server of
// adminDSN: it terminates the backends and walsenders on it and drops every
// replication slot of it first, giving up after a minute.
func DropDatabase(ctx context.Context, adminDSN, name string) error {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("drop database %s: connect to %s: %w", name, redactDSN(adminDSN), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		// Walsenders of a logical slot are connected to the slot's database.
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			return fmt.Errorf("drop database %s: terminate backends: %w", name, err)
		}
		// N.B. a logical slot blocks DROP DATABASE even WITH (FORCE); an
		// active one cannot be dropped until its walsender has exited.
		rows, _ := conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		slots, err := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, slot := range slots {
			if err == nil {
				_, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
			}
		}
		var left int
		if err == nil {
			err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left)
		}
		if err == nil && left == 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("drop database %s: replication slots of the database still exist (%d left, last error: %v)", name, left, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// Exec runs sql (several statements when there are no args) on dsn and fails
// the test on error.
func (b *Bed) Exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	if err := Exec(ctx, dsn, sql, args...); err != nil {
		t.Fatalf("testbed: %q: %v", sql, err)
	}
}

// Exec runs sql (several statements when there are no args) on a
// connection of its own to dsn.
func Exec(ctx context.Context, dsn, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redactDSN(dsn), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// QueryRow runs sql on dsn when Scan is called, on a connection of its own,
// and returns Scan's error (pgx.ErrNoRows when there is no row).
func (b *Bed) QueryRow(t testing.TB, dsn, sql string, args ...any) pgx.Row {
	t.Helper()
	return &row{b: b, t: t, dsn: dsn, sql: sql, args: args}
}

type row struct {
	b    *Bed
	t    testing.TB
	dsn  string
	sql  string
	args []any
}

func (r *row) Scan(dest ...any) error {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redactDSN(r.dsn), err)
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, r.sql, r.args...).Scan(dest...)
}

// SlotInfo is a replication slot as pg_replication_slots shows it.
type SlotInfo struct {
	Exists, Active    bool
	ActivePID         int
	Plugin            string
	WALStatus         string // reserved, extended, unreserved, lost
	ConfirmedFlushLSN pglogrepl.LSN
	RestartLSN        pglogrepl.LSN
	Database          string
}

// Slot reads slot from pg_replication_slots (through dsn, any database of the
// server); Exists is false when there is no such slot.
func (b *Bed) Slot(t testing.TB, dsn, slot string) SlotInfo {
	t.Helper()
	var s SlotInfo
	var confirmed, restart string
	err := b.QueryRow(t, dsn, `SELECT active, coalesce(active_pid, 0), coalesce(plugin, ''),
		coalesce(wal_status, ''), coalesce(confirmed_flush_lsn::text, ''), coalesce(restart_lsn::text, ''),
		coalesce(database, '')
		FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&s.Active, &s.ActivePID, &s.Plugin, &s.WALStatus, &confirmed, &restart, &s.Database)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotInfo{}
	}
	if err != nil {
		t.Fatalf("testbed: read slot %s: %v", slot, err)
	}
	s.Exists = true
	s.ConfirmedFlushLSN = parseLSN(t, confirmed)
	s.RestartLSN = parseLSN(t, restart)
	return s
}

// CurrentWALLSN returns pg_current_wal_lsn().
func (b *Bed) CurrentWALLSN(t testing.TB, dsn string) pglogrepl.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	lsn, err := CurrentWALLSN(ctx, dsn)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return lsn
}

// CurrentWALLSN returns pg_current_wal_lsn(), read on a connection of its
// own to dsn.
func CurrentWALLSN(ctx context.Context, dsn string) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", redactDSN(dsn), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		return 0, fmt.Errorf("read pg_current_wal_lsn: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

func parseLSN(t testing.TB, s string) pglogrepl.LSN {
	t.Helper()
	if s == "" {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	return lsn
}

// RestartPostgres stops the server (pg_ctl stop -m fast -w: clients are
// disconnected, a checkpoint is written) and starts it again with the same
// arguments, waiting until it accepts connections. The test must have called
// Disrupt; against an external server the test fails (it cannot inject the
// fault), saying how to run it on a managed bed.
//
// N.B. the server is started directly rather than by `pg_ctl restart`, so that
// in a bed a test binary owns it gets the parent-death signal again.
func (b *Bed) RestartPostgres(t testing.TB) {
	t.Helper()
	if b.pg == nil {
		t.Fatalf("testbed: RestartPostgres needs a PostgreSQL the test bed manages, and %s names an external server; %s", EnvPGURL, runManaged)
	}
	b.requireDisrupt(t, "RestartPostgres")
	begin := time.Now()
	if err := b.pg.stop(); err != nil {
		t.Fatalf("testbed: restart PostgreSQL: %v", err)
	}
	if err := b.pg.launch(context.Background(), b.detached()); err != nil {
		t.Fatalf("testbed: restart PostgreSQL: %v", err)
	}
	t.Logf("testbed: restarted PostgreSQL in %.1fs", time.Since(begin).Seconds())
}
