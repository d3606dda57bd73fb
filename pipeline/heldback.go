package pipeline

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/pgcatalog"
)

// heldBack is the watch loop's account of whether PostgreSQL holds the
// stream back for the standbys its synchronized_standby_slots names (17+):
// a named physical slot that no standby confirms from (the usual state
// right after a failover, when the promoted server kept the old primary's
// setting) stops every logical walsender of a failover slot before it
// sends anything more; the walsender still answers, so the stream looks
// healthy. The watch loop (one goroutine) calls observe; Ready reads the
// reason.
type heldBack struct {
	reason  atomic.Pointer[string]
	suspect bool
	prevPos pglogrepl.LSN
}

// heldDecision is the pure decision: the stream is suspect when the setting
// holds (a named slot cannot confirm) and the server's WAL is past the
// stream's position; held when it was suspect at the poll before too and
// the stream's position has not moved since.
func heldDecision(prevSuspect bool, prevPos, pos, wal pglogrepl.LSN, holds bool) (suspect, held bool) {
	if !holds || wal <= pos {
		return false, false
	}
	return true, prevSuspect && pos <= prevPos
}

// observe takes one poll's reading: w from the server, pos the furthest
// position the stream has (received, the keepalives' WAL end, confirmed).
func (h *heldBack) observe(w pgcatalog.StandbyWait, pos pglogrepl.LSN, m *metrics.Metrics, log *zap.Logger, slot string) {
	suspect, held := heldDecision(h.suspect, h.prevPos, pos, w.WAL, w.Holds())
	h.suspect, h.prevPos = suspect, pos
	m.SetHeldBack(held)
	switch was := h.reason.Load() != nil; {
	case held && !was:
		reason := fmt.Sprintf("PostgreSQL holds the stream back: synchronized_standby_slots = '%s', and %s, so no logical walsender of a failover slot sends past what that standby confirmed (the server's WAL is at %s, the stream at %s)",
			w.Setting, strings.Join(w.Stuck, "; "), w.WAL, pos)
		h.reason.Store(&reason)
		log.Error(reason+": attach the standby that streams from that slot, or name only the standbys this server has (right after a promotion: ALTER SYSTEM SET synchronized_standby_slots = ''; SELECT pg_reload_conf(); and set it again once a new standby streams from its slot; docs/failover.md, \"After a promotion\")",
			zap.String("slot", slot), zap.String("synchronized_standby_slots", w.Setting), zap.Stringer("lsn", pos), zap.Stringer("server_wal_lsn", w.WAL))
	case !held && was:
		h.reason.Store(nil)
		log.Info("PostgreSQL no longer holds the stream back (synchronized_standby_slots)", zap.String("slot", slot),
			zap.String("synchronized_standby_slots", w.Setting), zap.Stringer("lsn", pos))
	}
}
