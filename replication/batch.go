package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/pgoutput"
)

// Batches of messages handed downstream: at most BatchMessages messages or
// about BatchBytes bytes (a larger message goes alone).
//
// N.B. one channel send, and at most one wake-up of the decoding goroutine,
// per batch instead of per message: in a backlog of single-row
// transactions (four messages each) the per-message hand-off was a
// goroutine wake-up (futex) per message, the largest share of walrelay's
// CPU. A batch is handed on as soon as the connection has no further
// message buffered, so a live stream waits for nothing.
const (
	BatchMessages = 512
	BatchBytes    = 256 << 10
)

// slabBytes is the size of the buffers messages are copied into.
const slabBytes = 64 << 10

// xlogData adds one message's WAL data to the batch going downstream and
// follows its transaction boundaries.
func (s *Stream) xlogData(ctx context.Context, ss *session, out chan<- []Message, data []byte, timer *time.Timer, nextStatus *time.Time) error {
	xld, err := pglogrepl.ParseXLogData(data)
	if err != nil {
		return fmt.Errorf("parse xlogdata: %w", err)
	}
	if len(xld.WALData) == 0 {
		return nil
	}
	// pgconn reuses its buffer: copy what goes downstream.
	//
	// N.B. into a slab shared by consecutive messages, one allocation per
	// slabBytes instead of one per message; a slab is never written again
	// once a message in it went downstream (the garbage collector frees it
	// with the last message that points into it).
	n := len(xld.WALData)
	if cap(ss.slab)-len(ss.slab) < n {
		ss.slab = make([]byte, 0, max(slabBytes, n))
	}
	wal := ss.slab[len(ss.slab) : len(ss.slab)+n : len(ss.slab)+n]
	ss.slab = ss.slab[:len(ss.slab)+n]
	copy(wal, xld.WALData)
	// N.B. a Begin or Commit out of protocol order, or a malformed one,
	// ends the session: the keepalive decision must not rest on it. It is
	// observed when batched: a commit in the batch counts as handed on,
	// and as unacknowledged, so an idle keepalive cannot confirm past it.
	if err := ss.tx.Observe(wal); err != nil {
		return fmt.Errorf("receive at %s: %w", xld.WALStart, err)
	}
	s.received.Store(uint64(xld.WALStart))
	ss.received = xld.WALStart
	if ss.reader != nil {
		ss.reader.Count(ss.now)
		if wal[0] == pgoutput.KindBegin {
			// N.B. both times are the server's clock.
			ss.reader.Lag(xld.ServerTime.Sub(ss.tx.Current().CommitTime))
		}
	}
	if ss.batch == nil {
		ss.batch = make([]Message, 0, 64)
	}
	ss.batch = append(ss.batch, Message{WALStart: xld.WALStart, Data: wal})
	ss.batchBytes += int64(len(wal))
	if len(ss.batch) >= BatchMessages || ss.batchBytes >= BatchBytes {
		return s.flush(ctx, ss, out, timer, nextStatus)
	}
	return nil
}

// buffered reports whether a message may be read without waiting for the
// socket: bytes wait in pgconn's buffer or in the socket reader's.
func (ss *session) buffered() bool {
	return ss.conn.Frontend().ReadBufferLen() > 0 || (ss.reader != nil && ss.reader.Buffered() > 0)
}

// flush hands the batch downstream, if there is one.
func (s *Stream) flush(ctx context.Context, ss *session, out chan<- []Message, timer *time.Timer, nextStatus *time.Time) error {
	if len(ss.batch) == 0 {
		return nil
	}
	// N.B. the consumer owns a batch once it is sent: a new one is started.
	b, n := ss.batch, ss.batchBytes
	ss.batch, ss.batchBytes = make([]Message, 0, cap(b)), 0
	return s.hand(ctx, ss, out, b, n, timer, nextStatus)
}

// hand sends batch m (of n bytes) downstream once it fits in the buffer
// (BufferBytes, and the channel's capacity). While it waits it keeps sending
// status updates, so a slow Kafka never lets wal_sender_timeout expire.
func (s *Stream) hand(ctx context.Context, ss *session, out chan<- []Message, m []Message, n int64, timer *time.Timer, nextStatus *time.Time) error {
	fits := s.buf.TryAcquire(n)
	if fits {
		select {
		case out <- m:
			return nil
		default:
		}
	}
	// N.B. the receive loop's clock reading is old after the wait.
	ss.stale = true
	for {
		// N.B. a nil channel disables its case: first wait for room in
		// the buffer, then for the channel.
		var send chan<- []Message
		var room <-chan struct{}
		if fits {
			send = out
		} else {
			room = s.buf.Wake()
		}
		// N.B. the acknowledgements of what waits downstream are confirmed
		// while the batch waits (prompt.go): a drain spends most of its
		// time here.
		timer.Reset(time.Until(ss.wake(*nextStatus)))
		select {
		case send <- m:
			ss.waited = true
			return nil
		case <-room:
			fits = s.buf.TryAcquire(n)
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			now := time.Now()
			s.beat.Store(now.UnixNano())
			if !now.Before(*nextStatus) {
				if err := s.sendStatus(ss); err != nil {
					return err
				}
				*nextStatus = now.Add(s.cfg.StatusInterval)
			}
			if ss.promptWanted(now) {
				if err := s.prompt(ss, now); err != nil {
					return err
				}
			}
		}
	}
}
