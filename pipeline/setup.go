package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/replication"
)

// SetupOptions are `walrelay setup`'s own settings.
type SetupOptions struct {
	// Print prints the SQL instead of running it; no server is needed.
	Print bool
	// Role is the least-privilege role to create ("" for none), Password
	// its password (WALRELAY_SETUP_ROLE_PASSWORD), Rotate sets it on an
	// existing role.
	Role, Password string
	Rotate         bool
	// Tables are the outbox tables of --tables.
	Tables []string
	// KafkaWarnings are the Kafka security warnings, logged before setup
	// reads the slot markers from Kafka.
	KafkaWarnings []string
}

// ConnectError is a sub-command's failed connection to PostgreSQL: the
// command reports it with RefusalHint's fix when the server refused.
type ConnectError struct{ Err error }

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// ConfigError is a mistake in a sub-command's settings, found before any
// server is asked: the command prints it as a list, exit 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string        { return e.Err.Error() }
func (e *ConfigError) Unwrap() error        { return e.Err }
func (e *ConfigError) Is(target error) bool { return target == replication.ErrSetup }

// mistake is a mistake a person must fix that a server reported, or that
// needs no list: IsSetupError.
type mistake struct{ error }

func (e mistake) Unwrap() error        { return e.error }
func (e mistake) Is(target error) bool { return target == replication.ErrSetup }

func setupMistake(err error) error { return mistake{err} }

// Setup creates, or with o.Print prints to stdout, the SQL for a
// least-privilege role, the publication and the slot, and the pg_hba.conf
// line. A mistake a person must fix is an IsSetupError (a *ConfigError
// when no server was asked); a missing slot
// walrelay streamed from is a *pgcatalog.SlotGoneError, not created again;
// a failed connection a *ConnectError. A warning goes to warn.
func Setup(cfg Config, o SetupOptions, stdout io.Writer, log *zap.Logger, warn func(string)) error {
	rc := cfg.Replication
	// N.B. the names are checked on every path, --print included (which
	// tolerates a missing --pg-url): each is written into SQL, the
	// replication protocol or pg_hba.conf.
	if err := pgcatalog.SetupNames(rc.Slot, rc.Publication, o.Role, o.Tables); err != nil {
		return &ConfigError{err}
	}
	tables := o.Tables
	if rc.NoTables {
		tables = nil // the message source alone: an empty publication
	}
	plan, err := pgcatalog.PlanSetup(o.Role, o.Password, o.Rotate, rc.Publication, rc.Slot, tables)
	if err != nil {
		return err
	}
	if rc.Messages {
		if err := plan.AddEmit(cfg.Decode); err != nil {
			return setupMistake(err)
		}
	}
	if o.Print {
		plan.Script(stdout, rc.SlotFailover != replication.FailoverOff)
		return nil
	}
	if o.Role != "" && o.Password == "" {
		return setupMistake(errors.New("set WALRELAY_SETUP_ROLE_PASSWORD to the new role's password, or pass --role '' to skip creating a role"))
	}
	if err := LogTLSWarnings(rc, "", log); err != nil {
		return &ConfigError{err}
	}
	for _, w := range o.KafkaWarnings {
		log.Warn(w) // setup reads the slot markers from Kafka
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgcatalog.OpenCommandConn(ctx, rc.ConnString)
	if err != nil {
		return &ConnectError{err}
	}
	defer conn.Close()
	db, err := conn.Database(ctx)
	if err != nil {
		return err
	}
	// N.B. a failover slot on 17+ unless --slot-failover=false, as run
	// creates it.
	version, err := conn.ServerVersion(ctx)
	if err != nil {
		return err
	}
	if version >= 170000 && rc.SlotFailover != replication.FailoverOff {
		plan.FailoverSlot()
	}
	// N.B. a slot walrelay streamed from is not created again: exit 3, as run.
	warning, err := CheckSetupSlot(ctx, cfg, conn, db)
	if warning != "" {
		warn(warning)
	}
	if err != nil {
		return err
	}
	if err := plan.Apply(ctx, conn, stdout); err != nil {
		return setupMistake(err)
	}
	fmt.Fprintln(stdout, "\n"+pgcatalog.HBALine(o.Role, pgcatalog.HBADatabase(db)))
	return nil
}
