package replication

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// ConfirmGap is the least time between two status updates: one is sent as
// soon as the confirmable position passes the one last sent, unless the
// last update is younger than ConfirmGap, in which case it waits until it
// is ConfirmGap old.
//
// N.B. a time, not a count of transactions: what a crash re-sends is
// measured in time (everything acknowledged and not yet confirmed), so a
// gap of 100 ms bounds that share at 100 ms of traffic at any rate, while
// it costs at most ten status updates a second (a 34-byte message the
// walsender handles without a reply) on a busy stream and nothing on an
// idle one. A count would re-send more at a low rate and send more updates
// at a high one.
const ConfirmGap = 100 * time.Millisecond

// promptFacts are what the decision to send a status update before the
// status interval reads.
type promptFacts struct {
	Now time.Time
	// LastSent is when the last status update of this connection was
	// sent, of any kind.
	LastSent time.Time
	// Confirmable is what a status update sent now would confirm
	// (reportedPositions); Confirmed what the last one did.
	Confirmable pglogrepl.LSN
	Confirmed   pglogrepl.LSN
	// HandedEnd is the end of the last commit handed downstream: above
	// Confirmed, something handed on waits for Kafka or for the
	// publication check.
	HandedEnd pglogrepl.LSN
}

// promptDue decides whether a status update is sent now, and when to look
// again: zero when nothing handed on waits to be confirmed (the status
// interval's updates and the keepalives go on regardless).
//
// N.B. next is never in the past: the stream arms its read deadline at
// it. While the confirmable position waits for the rate limit, next is
// when the limit lets it go; while nothing more is confirmable yet, the
// stream looks again ConfirmGap later (the watermark moves in other
// goroutines, unannounced).
func promptDue(f promptFacts) (send bool, next time.Time) {
	switch {
	case f.Confirmable <= f.Confirmed:
		if f.HandedEnd > f.Confirmed {
			next = f.Now.Add(ConfirmGap)
		}
	case f.Now.Before(f.LastSent.Add(ConfirmGap)):
		next = f.LastSent.Add(ConfirmGap)
	default:
		send = true
		if f.HandedEnd > f.Confirmable {
			next = f.Now.Add(ConfirmGap)
		}
	}
	return send, next
}

// promptWanted reports whether prompt should look now: its time has come,
// or, with no time set, a commit handed on is not yet confirmed (one
// comparison: the loop turns for every message).
func (ss *session) promptWanted(now time.Time) bool {
	if ss.promptAt.IsZero() {
		return ss.tx.LastEnd() > ss.confirmed
	}
	return !now.Before(ss.promptAt)
}

// wake is when the connection's loop must turn at the latest: the status
// interval's update, or prompt's next look if sooner.
func (ss *session) wake(nextStatus time.Time) time.Time {
	if !ss.promptAt.IsZero() && ss.promptAt.Before(nextStatus) {
		return ss.promptAt
	}
	return nextStatus
}

// prompt sends a status update if promptDue says so, and notes when to
// look again. N.B. the update confirms what reportedPositions decides, as
// every other: the watermark bounded by the publication check, never
// backwards.
func (s *Stream) prompt(ss *session, now time.Time) error {
	_, confirmable, _ := reportedPositions(s.sampleFacts(ss, 0, false))
	send, next := promptDue(promptFacts{Now: now, LastSent: ss.lastSent, Confirmable: confirmable, Confirmed: ss.confirmed, HandedEnd: ss.tx.LastEnd()})
	if send {
		if err := s.sendStatus(ss); err != nil {
			return err
		}
	}
	ss.promptAt = next
	return nil
}

// AckClock is an optional method set of a Confirmer, for the confirmation
// lag: checkpoint.Tracker satisfies it.
type AckClock interface {
	// AckedSince is when the watermark first moved after the last
	// ClearAcked; zero if it has not.
	AckedSince() time.Time
	// ClearAcked forgets AckedSince if it is still since and the watermark
	// is at most upTo: everything acknowledged is confirmed.
	ClearAcked(since time.Time, upTo pglogrepl.LSN)
}

// OnConfirmLag has f called, for every status update that moves the
// confirmed position, with the time since the oldest acknowledgement it
// confirms (the watermark's first move after the previous update that
// confirmed everything acknowledged). Called before Run.
func (s *Stream) OnConfirmLag(f func(time.Duration)) { s.confirmLag = f }

// observeConfirmLag reports the confirmation lag of an update that
// confirmed flush at now.
func (s *Stream) observeConfirmLag(flush pglogrepl.LSN, now time.Time) {
	c, ok := s.conf.(AckClock)
	if !ok || s.confirmLag == nil {
		return
	}
	since := c.AckedSince()
	if since.IsZero() {
		// N.B. an idle keepalive's WAL end, or a raised watermark:
		// nothing acknowledged waited.
		return
	}
	s.confirmLag(now.Sub(since))
	c.ClearAcked(since, flush)
}
