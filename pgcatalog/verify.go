package pgcatalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/replication"
)

// VerifierConn is the publication verifier's connection: the queries of
// one round (the WAL position L, the transactions running at L, whether
// they ended, and the publication check itself). The verifier's decisions
// (when a round begins, waits or passes) are the pipeline's.
type VerifierConn struct {
	conn *pgx.Conn
	cfg  replication.Config
}

// ConnectVerifier opens the verifier's connection to cfg's server. An error
// for which ShuttingDown is true says the server shuts down.
func ConnectVerifier(ctx context.Context, cfg replication.Config) (*VerifierConn, error) {
	c, err := replication.ConnectSQL(ctx, cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	return &VerifierConn{conn: c, cfg: cfg}, nil
}

// ShuttingDown reports whether err is the server refusing a connection
// because it shuts down (or restarts after a crash): cannot_connect_now
// (57P03).
func ShuttingDown(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03"
}

// WALInsertPosition is the server's current WAL insert position (L).
func (v *VerifierConn) WALInsertPosition(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := v.conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		return 0, fmt.Errorf("read wal position: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("read wal position: %w", err)
	}
	return lsn, nil
}

// RunningXIDs are the transactions running now (xid8 as text), read in a
// statement of its own, so with a snapshot taken after any earlier one.
func (v *VerifierConn) RunningXIDs(ctx context.Context) ([]string, error) {
	var xip []string
	if err := v.conn.QueryRow(ctx, `SELECT coalesce(array_agg(x::text), '{}') FROM pg_snapshot_xip(pg_current_snapshot()) x`).Scan(&xip); err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return xip, nil
}

// InProgress counts the transactions of xip still in progress.
func (v *VerifierConn) InProgress(ctx context.Context, xip []string) (int, error) {
	var open int
	if err := v.conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[]) x WHERE pg_xact_status(x::xid8) = 'in progress'`, xip).Scan(&open); err != nil {
		return 0, fmt.Errorf("read transaction status: %w", err)
	}
	return open, nil
}

// VerifyPublication runs VerifyPublication on this connection.
func (v *VerifierConn) VerifyPublication(ctx context.Context) error {
	return VerifyPublication(ctx, v.conn, v.cfg)
}

// Close closes the connection.
func (v *VerifierConn) Close(ctx context.Context) { v.conn.Close(ctx) }
