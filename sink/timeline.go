package sink

import (
	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
)

// coverage says how much of the WAL a checkpoint covers on the server's
// timeline.
type coverage int

const (
	covered    coverage = iota // the whole checkpoint: same timeline
	sharedPart                 // only up to where the checkpoint's timeline ended
	notShared                  // nothing: its timeline is not in the history
)

// skipBound returns the position below which src's server has the WAL a
// checkpoint of timeline cpTLI ending at cp covers: transactions ending at
// or before it are in Kafka and are not produced again.
//
// N.B. LSNs are comparable only within one timeline history. After a
// failover to a standby that had received the WAL only up to S below the
// checkpoint (an asynchronous standby), the promoted server writes new
// transactions at LSNs up to the checkpoint on its new timeline: skipping
// them by LSN alone would lose them. So on another timeline the checkpoint
// covers only the history it shares with it, up to where the checkpoint's
// timeline ended in the server's timeline history; if its timeline is not
// in that history (another branch, or a server behind it), it covers
// nothing: duplicates, never a gap. A checkpoint without a timeline
// (cpTLI 0, written before walrelay recorded it) is taken for one of the
// server's current timeline, which is what walrelay assumed before.
func skipBound(src kafkastate.Source, cp pglogrepl.LSN, cpTLI int32) (pglogrepl.LSN, coverage) {
	if cpTLI == 0 || cpTLI == src.Timeline {
		return cp, covered
	}
	end, ok := src.TimelineEnds[cpTLI]
	if !ok {
		return 0, notShared
	}
	if end < cp {
		return end, sharedPart
	}
	return cp, covered
}

// checkpointBound is skipBound of the sink's source, logged when it lowers
// the checkpoint.
func (s *Sink) checkpointBound(cp pglogrepl.LSN, cpTLI int32) pglogrepl.LSN {
	src := s.deps.Source
	bound, cov := skipBound(src, cp, cpTLI)
	switch cov {
	case sharedPart:
		s.log.Warn("exactly-once: the checkpoint's timeline ended before the checkpoint in the server's timeline history (a failover to a standby that had not received all of it): only transactions ending at or before the switchpoint are skipped",
			zap.Stringer("checkpoint", cp), zap.Int32("checkpoint_timeline", cpTLI), zap.Int32("timeline", src.Timeline), zap.Stringer("skip_bound", bound))
	case notShared:
		s.log.Warn("exactly-once: the checkpoint's timeline is not in the server's timeline history: nothing is skipped (what the checkpoint covered may come again as duplicates)",
			zap.Stringer("checkpoint", cp), zap.Int32("checkpoint_timeline", cpTLI), zap.Int32("timeline", src.Timeline))
	}
	return bound
}
