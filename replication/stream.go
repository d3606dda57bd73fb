package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/budget"
	"github.com/walrelay/walrelay/internal/pgoutput"
)

// Message is the WAL data of one XLogData message. Data is a copy the
// receiver owns.
type Message struct {
	WALStart pglogrepl.LSN
	Data     []byte
}

// Confirmer says which position may be confirmed: everything up to it is
// acknowledged by Kafka. checkpoint.Tracker satisfies it.
type Confirmer interface {
	Watermark() pglogrepl.LSN
	// Raise moves the watermark up to a position PostgreSQL has already
	// confirmed, while nothing is registered; it reports whether the
	// watermark is now at least there.
	Raise(pglogrepl.LSN) bool
}

// Bounder is an optional method of a Confirmer: no position above Bound is
// confirmed, a keepalive's WAL end included (the pipeline bounds it by the
// last verification of the publication).
type Bounder interface {
	Bound() pglogrepl.LSN
}

// Stream streams one slot over one connection. Its positions may be read
// from any goroutine.
type Stream struct {
	cfg  Config
	conf Confirmer
	log  *zap.Logger

	received  atomic.Uint64 // WAL start of the last XLogData received
	confirmed atomic.Uint64 // last flush position sent
	walEnd    atomic.Uint64 // server WAL end of the last keepalive
	beat      atomic.Int64  // unix nanoseconds of the receive loop's last turn
	streaming atomic.Bool   // START_REPLICATION succeeded and Run has not returned
	streamed  atomic.Bool   // START_REPLICATION succeeded once

	buf *budget.Budget // bytes of messages handed on and not yet Done

	// heldCheck, when set, is asked once the slot is held, before anything
	// is read from it (CheckWhenHeld).
	heldCheck func(context.Context, *pgx.Conn) error
	// held, when set, is called once the slot is held and heldCheck
	// passed, before anything is read from it (OnHeld).
	held func()

	timeline int32 // ExpectTimeline's; 0: not checked
	// walSenderTimeout is the server's wal_sender_timeout for this
	// connection (SetWALSenderTimeout; 0: disabled or not known).
	walSenderTimeout time.Duration

	confirmLag func(time.Duration) // OnConfirmLag's; nil: not observed
}

// ExpectTimeline makes Run check, on its own connection before it starts
// replication, that the server is on timeline tli (IDENTIFY_SYSTEM), and
// fail otherwise. Called before Run.
//
// N.B. for exactly-once, whose checkpoint LSNs are positions in the
// history of the timeline the pipeline read before the stream connected: a
// failover in between puts the stream on a server whose new transactions
// the checkpoint could seem to cover. The next attempt reads it again.
func (s *Stream) ExpectTimeline(tli int32) { s.timeline = tli }

// BufferBytes bounds the bytes of messages received and not yet decoded
// (Done); a single larger message passes alone.
const BufferBytes = 4 << 20

// Streamed reports whether the stream ever held the slot.
func (s *Stream) Streamed() bool { return s.streamed.Load() }

// Beat is when the receive loop last turned; it turns at least once per
// status interval while the stream is healthy.
func (s *Stream) Beat() time.Time { return time.Unix(0, s.beat.Load()) }

// Streaming reports whether the stream holds the slot.
func (s *Stream) Streaming() bool { return s.streaming.Load() }

// New returns a stream; Run connects.
func New(cfg Config, conf Confirmer, log *zap.Logger) *Stream {
	return &Stream{cfg: cfg.WithDefaults(), conf: conf, log: log.Named("replication"), buf: budget.New(BufferBytes)}
}

// SetWALSenderTimeout gives the server's wal_sender_timeout for walrelay's
// role and database, as the preflight read it (pgcatalog.Prepared), which
// the liveness deadline honours (livenessDeadline).
func (s *Stream) SetWALSenderTimeout(d time.Duration) { s.walSenderTimeout = d }

// CheckWhenHeld has Run call f with a SQL connection of the slot's
// database once START_REPLICATION holds the slot, before anything is read
// from it: an error from f ends Run (the slot is released with the
// connection) and is returned.
func (s *Stream) CheckWhenHeld(f func(context.Context, *pgx.Conn) error) { s.heldCheck = f }

// OnHeld has Run call f each time START_REPLICATION holds the slot (after
// CheckWhenHeld's check), before anything is read from it. Called before
// Run.
func (s *Stream) OnHeld(f func()) { s.held = f }

// Done says that the consumer of Run's batches no longer needs batch's
// buffer space: it has decoded it.
func (s *Stream) Done(batch []Message) {
	var n int64
	for _, m := range batch {
		n += int64(len(m.Data))
	}
	s.buf.Release(n)
}

// Received, Confirmed and ServerWALEnd report positions for metrics.
func (s *Stream) Received() pglogrepl.LSN     { return pglogrepl.LSN(s.received.Load()) }
func (s *Stream) Confirmed() pglogrepl.LSN    { return pglogrepl.LSN(s.confirmed.Load()) }
func (s *Stream) ServerWALEnd() pglogrepl.LSN { return pglogrepl.LSN(s.walEnd.Load()) }

// session is the state of one replication connection, owned by Run's goroutine.
type session struct {
	conn      *pgconn.PgConn
	netConn   net.Conn
	confirmed pglogrepl.LSN // last flush position sent
	// tx follows the messages handed downstream: InTx between a Begin and
	// its Commit, LastEnd the end LSN of the last Commit. With the
	// watermark they say whether anything handed on is unacknowledged.
	tx       pgoutput.TxState
	received pglogrepl.LSN // WAL start of the last XLogData, or the start
	// batch holds messages received and not yet handed downstream, in
	// order; batchBytes is the sum of their lengths.
	batch      []Message
	batchBytes int64
	slab       []byte          // the room left in it holds the next messages' data
	reader     *coalescingConn // the socket under the connection; nil if unknown
	// waited is set by hand when a batch waited for room downstream (a
	// slow Kafka): the stream read nothing meanwhile. receive clears it
	// before the flush that precedes a read.
	waited bool
	// quietLimit is how long the server may stay silent before the
	// connection counts as dead (livenessDeadline); quietWarned is set
	// once the silence passed four status intervals and was logged.
	quietLimit  time.Duration
	quietWarned bool
	// lastSent is when the last status update was sent; promptAt when
	// promptDue asked to look again (zero: not before nextStatus).
	lastSent time.Time
	promptAt time.Time
	// now is the receive loop's time (clock.go): read after each read of
	// the socket, shared by the messages that read returned; stale when
	// the loop may have blocked since, reuses the messages that shared it.
	now    time.Time
	stale  bool
	reuses int
}

// Run streams from start (the slot's confirmed_flush_lsn, or the slot's
// position once this stream holds it if that is higher) into out until ctx
// is cancelled (abort: returns ctx.Err()) or stop is closed (graceful: the
// transaction being received is finished, out is closed, and Run waits for
// drained before it sends the final status update and returns nil).
func (s *Stream) Run(ctx context.Context, stop <-chan struct{}, start pglogrepl.LSN, out chan<- []Message, drained <-chan struct{}) error {
	sql := openSQL(ctx, s.cfg.ConnString) // heldconn.go: heldPosition's
	defer sql.close()
	conn, reader, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if s.timeline != 0 {
		id, err := pglogrepl.IdentifySystem(ctx, conn)
		if err != nil {
			return fmt.Errorf("identify system: %w", err)
		}
		if id.Timeline != s.timeline {
			return fmt.Errorf("start replication: the server is on timeline %d, not %d as read before connecting (a failover in between): starting again", id.Timeline, s.timeline)
		}
	}

	// N.B. protocol 1: whole transactions after their commit, never
	// in-progress ones; a transactional message comes inside its
	// transaction, in WAL order with its rows, at the commit.
	args := []string{"proto_version '1'", "publication_names '" + s.cfg.Publication + "'"}
	if s.cfg.Messages {
		args = append(args, "messages 'true'")
	}
	err = pglogrepl.StartReplication(ctx, conn, s.cfg.Slot, start, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
			return fmt.Errorf("%w: %s", ErrSlotInUse, pgErr.Message)
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42704" { // undefined_object
			// N.B. pgcatalog.Prepare found or created the slot just before, and the
			// pipeline recorded it: it was dropped since, and is gone.
			return &slotGoneError{msg: fmt.Sprintf("replication slot gone: start replication: %s: slot %q was dropped after walrelay prepared it; walrelay does not create it again (see docs/failover.md); start once with --recreate-missing-slot to create it and accept the gap", pgErr.Message, s.cfg.Slot)}
		}
		return fmt.Errorf("start replication: %w", err)
	}
	// N.B. the start position is the slot's confirmed_flush_lsn, and so is
	// the first position this session may confirm: never zero, never the
	// server's current WAL position. It is read again now that this session
	// holds the slot: the previous holder's final status update may have
	// moved it after pgcatalog.Prepare read it, the server streams from its own
	// position, and confirming the older one would move the slot back on a
	// server without the guard against a lower flush (17 and the latest
	// minor releases of older versions have it).
	held, err := s.heldPosition(ctx, sql, conn.PID())
	if errors.Is(err, errNotHeld) {
		// N.B. the walsender let go of the slot it had just acquired: it
		// failed, and its error is on the replication connection, unread.
		return s.senderError(ctx, conn, err)
	}
	if err != nil {
		return err
	}
	if held > start {
		if !s.conf.Raise(held) {
			return fmt.Errorf("start replication: the slot moved to %s after it was read at %s, and the watermark cannot follow: transactions are registered", held, start)
		}
		s.log.Info("slot moved after it was read; starting from its confirmed position", zap.String("slot", s.cfg.Slot),
			zap.Stringer("read_lsn", start), zap.Stringer("lsn", held))
		start = held
	}
	ss := &session{conn: conn, netConn: conn.Conn(), confirmed: start, tx: pgoutput.NewTxState(start), received: start, reader: reader,
		quietLimit: livenessDeadline(s.cfg.StatusInterval, s.walSenderTimeout)}
	s.confirmed.Store(uint64(start))
	s.beat.Store(time.Now().UnixNano())
	s.streaming.Store(true)
	s.streamed.Store(true)
	defer s.streaming.Store(false)
	tlsOn, tlsVersion := LiveTLS(conn)
	s.log.Info("streaming", zap.String("slot", s.cfg.Slot), zap.String("publication", s.cfg.Publication), zap.Stringer("lsn", start),
		zap.Bool("tls", tlsOn), zap.String("tls_version", tlsVersion))

	stopCtx, stopCancel := context.WithCancel(ctx)
	defer stopCancel()
	go func() {
		select {
		case <-stop:
			stopCancel()
		case <-stopCtx.Done():
		}
	}()
	// Wake a blocked read when asked to stop or abort.
	wake := func() { ss.netConn.SetReadDeadline(time.Now()) }
	defer context.AfterFunc(stopCtx, wake)()
	defer context.AfterFunc(ctx, wake)()

	err = s.receive(ctx, stopCtx, ss, out)
	if err != nil {
		s.finalStatus(ss, false)
		return err
	}
	// Graceful stop: the transaction being received is complete downstream.
	close(out)
	s.log.Info("stopping: waiting for outstanding acknowledgements", zap.Duration("timeout", s.cfg.ShutdownTimeout))
	tick := time.NewTicker(s.cfg.StatusInterval)
	defer tick.Stop()
wait:
	for {
		select {
		case <-drained:
			break wait
		case <-ctx.Done():
			s.finalStatus(ss, false)
			return ctx.Err()
		case <-tick.C:
			s.beat.Store(time.Now().UnixNano())
			if err := s.sendStatus(ss); err != nil {
				return err
			}
		}
	}
	if err := s.finalStatus(ss, true); err != nil {
		// The update was sent; only the server's receipt is unconfirmed.
		s.log.Warn("final status update", zap.Error(err))
	}
	return nil
}

// receive reads the stream until ctx is cancelled (error) or stopCtx is
// done and no transaction is half received (nil).
func (s *Stream) receive(ctx, stopCtx context.Context, ss *session, out chan<- []Message) error {
	interval := s.cfg.StatusInterval
	nextStatus := time.Now().Add(interval)
	var stopBy time.Time
	// N.B. an idle server may send nothing for long: after two quiet status
	// intervals the status update asks for a reply; after four without
	// any message, or wal_sender_timeout when longer (ss.quietLimit), the
	// connection is taken for dead and re-established.
	lastRecv := time.Now()
	received := false   // a message arrived since lastRecv was set
	var armed time.Time // the read deadline set, if it is nextStatus
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		// N.B. one clock reading per read of the socket (clock.go): the
		// loop turns for every message of a backlog.
		now := ss.clock()
		if received {
			lastRecv, received = now, false
		}
		s.beat.Store(now.UnixNano())
		if err := ctx.Err(); err != nil {
			return err
		}
		if stopBy.IsZero() && stopCtx.Err() != nil {
			stopBy = now.Add(s.cfg.ShutdownTimeout)
			if ss.tx.InTx() {
				s.log.Info("stopping: finishing the transaction being received")
			}
		}
		if !stopBy.IsZero() && (!ss.tx.InTx() || now.After(stopBy)) {
			return s.flush(ctx, ss, out, timer, &nextStatus)
		}
		if !now.Before(nextStatus) {
			if err := s.sendStatusReq(ss, now.Sub(lastRecv) > 2*interval); err != nil {
				return err
			}
			nextStatus = now.Add(interval)
		}
		if ss.promptWanted(now) {
			if err := s.prompt(ss, now); err != nil {
				return err
			}
		}
		if wake := ss.wake(nextStatus); !armed.Equal(wake) {
			ss.netConn.SetReadDeadline(wake)
			armed = wake
		}
		// Re-check after arming the deadline: a wake-up that fired before it
		// was overwritten is seen here.
		if ctx.Err() != nil || (stopBy.IsZero() && stopCtx.Err() != nil) {
			continue
		}
		// N.B. the batch goes downstream before a read that may block:
		// no message waits for the next one to arrive.
		if len(ss.batch) > 0 && !ss.buffered() {
			ss.waited = false
			if err := s.flush(ctx, ss, out, timer, &nextStatus); err != nil {
				return err
			}
			if ss.waited {
				// N.B. the stream read nothing while the batch waited for
				// Kafka, for as long as Kafka took: PostgreSQL's silence
				// counts from now, and the read deadline armed before the
				// wait has passed. Taken for a dead connection, a Kafka
				// stall of four status intervals restarted the pipeline
				// once Kafka answered.
				lastRecv = time.Now()
				continue
			}
		}
		reads := ss.socketReads()
		msg, err := ss.conn.ReceiveMessage(context.Background())
		if ss.socketReads() != reads {
			ss.tick()
		}
		if err != nil {
			if err := s.readError(ss, err, lastRecv); err != nil {
				return err
			}
			// N.B. re-arm: the deadline passed, or a wake-up moved it.
			armed = time.Time{}
			continue
		}
		received = true
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := s.copyData(ctx, ss, out, msg.Data, timer, &nextStatus); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return errors.New("replication stream: server ended the stream")
		}
	}
}

// readError classifies an error of ReceiveMessage: nil for a read deadline
// that passed while the connection is alive (read again), else the error
// that ends the session.
func (s *Stream) readError(ss *session, err error, lastRecv time.Time) error {
	var tooBig *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooBig) {
		// N.B. permanent: the same message comes again after every
		// restart, at the same position, until the limit is raised.
		// pgconn has closed the connection: the slot stays at the
		// last position confirmed, before the message.
		return setupErrorf("receive: PostgreSQL sent a message of %d bytes after LSN %s, more than --pg-max-message-bytes %d: a row of an outbox table, with all its columns, is larger than walrelay accepts; the slot stays at %s, before it. Raise --pg-max-message-bytes (WALRELAY_PG_MAX_MESSAGE_BYTES) to at least %d, memory permitting: receiving it takes about twice its size",
			tooBig.ActualBodyLen, ss.received, tooBig.MaxExpectedBodyLen, ss.confirmed, tooBig.ActualBodyLen)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		quiet := time.Since(lastRecv)
		if quiet > ss.quietLimit {
			return fmt.Errorf("receive: no message from PostgreSQL for %s, not even a reply to a status update asking for one (the limit: four status intervals, or wal_sender_timeout when longer, %s): the connection is dead", quiet.Round(time.Second), ss.quietLimit)
		}
		switch {
		case quiet <= 4*s.cfg.StatusInterval:
			ss.quietWarned = false
		case !ss.quietWarned:
			ss.quietWarned = true
			s.log.Warn("no message from PostgreSQL for four status intervals, not even a reply to a status update asking for one: waiting up to wal_sender_timeout before taking the connection for dead",
				zap.Duration("quiet", quiet.Round(time.Millisecond)), zap.Duration("wal_sender_timeout", ss.quietLimit))
		}
		return nil
	}
	return fmt.Errorf("receive: %w", err)
}

// copyData handles one CopyData message of the replication stream, by its
// first byte.
func (s *Stream) copyData(ctx context.Context, ss *session, out chan<- []Message, data []byte, timer *time.Timer, nextStatus *time.Time) error {
	if len(data) == 0 {
		return errors.New("receive: empty CopyData")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		return s.keepalive(ss, data[1:], nextStatus)
	case pglogrepl.XLogDataByteID:
		return s.xlogData(ctx, ss, out, data[1:], timer, nextStatus)
	}
	return nil
}

// keepalive records the server's WAL end and answers when asked, or when
// that end may be confirmed.
func (s *Stream) keepalive(ss *session, data []byte, nextStatus *time.Time) error {
	pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data)
	if err != nil {
		return fmt.Errorf("parse keepalive: %w", err)
	}
	s.walEnd.Store(uint64(pkm.ServerWALEnd))
	// N.B. the keepalive's WAL end may be confirmed only when nothing
	// handed downstream is unacknowledged and no transaction is half
	// received: every commit before it was sent before this keepalive and
	// is acknowledged, so an idle outbox on a busy database does not pin
	// WAL. Both facts come from pgoutput.TxState, the parser decode uses.
	idle := !ss.tx.InTx() && s.conf.Watermark() == ss.tx.LastEnd()
	if pkm.ReplyRequested || (idle && pkm.ServerWALEnd > ss.confirmed) {
		if err := s.sendStatusAt(ss, pkm.ServerWALEnd, idle, false); err != nil {
			return err
		}
		*nextStatus = time.Now().Add(s.cfg.StatusInterval)
	}
	return nil
}
