package replication

import "github.com/jackc/pglogrepl"

// positionFacts are what the decision of which position to confirm reads.
// Run's goroutine, the one that owns the replication connection, samples
// each of them just before a status update.
type positionFacts struct {
	// Watermark is the Confirmer's: every transaction up to it is
	// acknowledged by Kafka.
	Watermark pglogrepl.LSN
	// Bound is the Bounder's, when Bounded: nothing above it is confirmed.
	Bound   pglogrepl.LSN
	Bounded bool
	// WALEnd is a keepalive's server WAL end, and Idle says that nothing
	// handed downstream is unacknowledged and no transaction is half
	// received (keepalive); outside a keepalive both are zero.
	WALEnd pglogrepl.LSN
	Idle   bool
	// Confirmed is the flush position last sent on this connection.
	Confirmed pglogrepl.LSN
}

// reportedPositions decides the write, flush and apply positions of one
// status update: the watermark, or the keepalive's WAL end while idle,
// bounded by the verified publication, never below what was sent before.
func reportedPositions(f positionFacts) (write, flush, apply pglogrepl.LSN) {
	pos := f.Watermark
	// N.B. the keepalive's WAL end only while nothing is in flight: every
	// commit before it was sent before the keepalive and is acknowledged,
	// so an idle outbox on a busy database does not pin WAL.
	if f.Idle && f.WALEnd > pos {
		pos = f.WALEnd
	}
	// N.B. nothing past what the publication check has covered: a row the
	// publication left out since is absent from the stream.
	if f.Bounded && pos > f.Bound {
		pos = f.Bound
	}
	// N.B. never move backwards: PostgreSQL before 17 would accept a lower
	// confirmed_flush_lsn.
	if pos < f.Confirmed {
		pos = f.Confirmed
	}
	// N.B. write, flush and apply are all set: pglogrepl copies write into
	// a zero flush, which would confirm unacknowledged data.
	return pos, pos, pos
}
