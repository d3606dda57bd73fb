package pgcatalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/replication"
)

// SlotState is what Prepare found.
type SlotState struct {
	// ConfirmedFlush is the slot's confirmed_flush_lsn: where streaming
	// starts and the watermark begins.
	ConfirmedFlush pglogrepl.LSN
	WALStatus      string
	Created        bool
	// WALSenderTimeout is the server's wal_sender_timeout for walrelay's
	// role and database (0: disabled), which the stream's liveness
	// deadline honours.
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
func Prepare(ctx context.Context, cfg replication.Config, log *zap.Logger) (SlotState, error) {
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

// prep is one run of the setup checks over one connection.
type prep struct {
	conn     *pgx.Conn
	cfg      replication.Config
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

func newPrep(ctx context.Context, cfg replication.Config, log *zap.Logger, dryRun bool) (*prep, error) {
	cfg = cfg.WithDefaults()
	conn, err := replication.ConnectSQL(ctx, cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	// The logger keeps the name it had before the control plane left
	// package replication: log lines read as they did.
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
		{"database encoding", p.encoding},
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
