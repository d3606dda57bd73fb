package replication

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectReplication opens a replication connection (replication=database) of cfg,
// for the commands only it accepts (IDENTIFY_SYSTEM, ALTER_REPLICATION_SLOT).
func ConnectReplication(ctx context.Context, cfg Config) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, setupErrorf("PostgreSQL connection string: %s", redactErr(err))
	}
	pc.RuntimeParams["replication"] = "database"
	maps.Copy(pc.RuntimeParams, sessionParams)
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "walrelay"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", err)
	}
	return conn, nil
}

// sessionParams are asked for by every connection walrelay opens, in the
// startup packet: they win over a role's or database's ALTER ... SET and
// over the connection string's options.
//
// N.B. PostgreSQL sends text in the session's client_encoding, which is
// the database's encoding (LATIN1, say) unless a role, the database or the
// connection sets another: pgoutput converts each value of a row to it
// (logicalrep_write_tuple, pq_sendcountedtext), and the catalog queries'
// results are converted too. walrelay relays UTF-8, so it asks for UTF8
// whatever the database's encoding: a LATIN1 database's rows arrive as
// UTF-8, and a role's client_encoding = 'LATIN1' can neither turn them into
// LATIN1 bytes nor make the walsender fail on a character LATIN1 lacks. A
// logical message's content is the exception: pgoutput sends it as stored
// (pq_sendbytes), so pgcatalog refuses the message source on a database
// that is not UTF8.
var sessionParams = map[string]string{
	"client_encoding": "UTF8",
}

// ConnectSQL opens a normal (SQL) connection of connString with the
// session settings every walrelay connection asks for (client_encoding
// UTF8): the control plane's queries read names and values in UTF-8.
func ConnectSQL(ctx context.Context, connString string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	maps.Copy(cc.RuntimeParams, sessionParams)
	return pgx.ConnectConfig(ctx, cc)
}

// outputStyles are the settings of the replication session that decide how
// values are printed: the decoder reads timestamps in ISO DateStyle and
// bytea in hex (another bytea_output made every bytea event poison), and
// header values are passed on in PostgreSQL's default styles.
var outputStyles = map[string]string{
	"DateStyle":     "ISO, MDY",
	"IntervalStyle": "postgres",
	"bytea_output":  "hex",
}

func (s *Stream) connect(ctx context.Context) (*pgconn.PgConn, *coalescingConn, error) {
	pc, err := pgconn.ParseConfig(s.cfg.ConnString)
	if err != nil {
		return nil, nil, setupErrorf("PostgreSQL connection string: %s", redactErr(err))
	}
	pc.RuntimeParams["replication"] = "database"
	// N.B. pgoutput sends each value as the walsender's session prints it,
	// and a role's or database's settings (ALTER ... SET) reach that
	// session: the styles the decoder reads are asked for here, whatever
	// they set.
	maps.Copy(pc.RuntimeParams, outputStyles)
	maps.Copy(pc.RuntimeParams, sessionParams)
	// N.B. a message above the limit is refused from its header, before its
	// body is read: one huge row cannot take the memory.
	pc.MaxProtocolMessageBodyLen = s.cfg.MaxMessageBytes
	var reader *coalescingConn // the last socket dialed: the one connected
	coalesceReads(pc, s.cfg.ReadWait, func(c *coalescingConn) { reader = c })
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "walrelay"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("connect for replication: %w", err)
	}
	return conn, reader, nil
}

// heldPosition reads the slot's confirmed_flush_lsn through a normal
// connection, from the row that names pid, this stream's walsender, as the
// slot's holder: nobody else can move it any more.
func (s *Stream) heldPosition(ctx context.Context, sql *pendingConn, pid uint32) (pglogrepl.LSN, error) {
	defer sql.close()
	conn, err := sql.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("read held slot position: %w", err)
	}
	var confirmed *string
	err = conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = $2`,
		s.cfg.Slot, int64(pid)).Scan(&confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("read held slot position: pg_replication_slots shows slot %q %w (pid %d)", s.cfg.Slot, errNotHeld, pid)
	}
	if err != nil {
		return 0, fmt.Errorf("read held slot position: %w", err)
	}
	if confirmed == nil {
		return 0, fmt.Errorf("read held slot position: slot %q has no confirmed_flush_lsn", s.cfg.Slot)
	}
	lsn, err := pglogrepl.ParseLSN(*confirmed)
	if err != nil {
		return 0, fmt.Errorf("read held slot position: %w", err)
	}
	if s.heldCheck != nil {
		// N.B. before anything is read from the slot: it is released
		// with the replication connection if the check says so.
		if err := s.heldCheck(ctx, conn); err != nil {
			return 0, err
		}
	}
	if s.held != nil {
		s.held()
	}
	return lsn, nil
}
