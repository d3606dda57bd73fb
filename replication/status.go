package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"
)

// sendStatus sends a status update confirming what reportedPositions
// decides, without asking for a reply.
func (s *Stream) sendStatus(ss *session) error {
	return s.sendStatusAt(ss, 0, false, false)
}

// sendStatusReq sends a status update, asking the server to reply when
// reply is set.
func (s *Stream) sendStatusReq(ss *session, reply bool) error {
	return s.sendStatusAt(ss, 0, false, reply)
}

// sendStatusAt sends a status update confirming what reportedPositions
// decides: the watermark, or walEnd when idle says the keepalive position
// may be confirmed.
func (s *Stream) sendStatusAt(ss *session, walEnd pglogrepl.LSN, idle, reply bool) error {
	write, flush, apply := reportedPositions(s.sampleFacts(ss, walEnd, idle))
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), ss.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write,
		WALFlushPosition: flush,
		WALApplyPosition: apply,
		ClientTime:       time.Now(),
		ReplyRequested:   reply,
	})
	if err != nil {
		return fmt.Errorf("send status update: %w", err)
	}
	now := time.Now()
	ss.lastSent = now
	ss.stale = true // clock.go: the write may have waited
	if flush != ss.confirmed {
		if s.log.Core().Enabled(zap.DebugLevel) {
			s.log.Debug("confirmed", zap.Stringer("lsn", flush), zap.Bool("idle", idle))
		}
		s.observeConfirmLag(flush, now)
	}
	ss.confirmed = flush
	s.confirmed.Store(uint64(flush))
	return nil
}

// sampleFacts samples what reportedPositions reads.
func (s *Stream) sampleFacts(ss *session, walEnd pglogrepl.LSN, idle bool) positionFacts {
	f := positionFacts{Watermark: s.conf.Watermark(), WALEnd: walEnd, Idle: idle, Confirmed: ss.confirmed}
	if b, ok := s.conf.(Bounder); ok {
		f.Bound, f.Bounded = b.Bound(), true
	}
	return f
}

// finalStatus sends the last status update. With graceful, it also ends the
// copy stream so that the server has read the update before the connection
// closes.
func (s *Stream) finalStatus(ss *session, graceful bool) error {
	if ss.conn.IsClosed() {
		return nil
	}
	ss.netConn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	err := s.sendStatus(ss)
	if err == nil && graceful {
		ss.netConn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = pglogrepl.SendStandbyCopyDone(context.Background(), ss.conn)
		if err != nil {
			err = fmt.Errorf("end replication stream: %w", err)
		}
	}
	if graceful && err == nil {
		s.log.Info("stopped", zap.String("slot", s.cfg.Slot), zap.Stringer("lsn", ss.confirmed))
	}
	return err
}
