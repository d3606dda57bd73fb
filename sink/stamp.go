package sink

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Record timestamps within their topic's bounds. A record is stamped
// with its transaction's commit time, and a broker refuses a timestamp
// further behind its clock than the topic's message.timestamp.before.max.ms,
// or further ahead than message.timestamp.after.max.ms (INVALID_TIMESTAMP):
// a backlog older than the first, or a PostgreSQL clock ahead of the
// brokers' by more than the second. Such a record is stamped with the
// current time instead, and the commit time goes into HeaderCommitTime.

// HeaderCommitTime is the header of a record stamped with the time it was
// handed to Kafka instead of its commit time: the commit time, in
// milliseconds since the Unix epoch (the unit of a Kafka timestamp).
const HeaderCommitTime = "walrelay.commit.time"

// unbounded is the bound of a topic that accepts any timestamp that way.
const unbounded = time.Duration(math.MaxInt64)

// stampBounds are the timestamps a topic accepts, around its broker's clock.
type stampBounds struct {
	before, after time.Duration // message.timestamp.before.max.ms and .after.max.ms
	logAppend     bool          // message.timestamp.type=LogAppendTime: the broker stamps
}

// noBounds accepts every timestamp: a topic whose configs were not read.
var noBounds = stampBounds{before: unbounded, after: unbounded}

// readBound parses a bound in milliseconds; Kafka's default, Long.MAX_VALUE,
// and anything as long, is unbounded.
func readBound(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || ms < 0:
		return 0, false
	case ms >= int64(unbounded/time.Millisecond):
		return unbounded, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// set applies one of the topic's configs to b. N.B. the topic's configs as
// described carry the broker's log.message.timestamp.* defaults where
// the topic sets none; message.timestamp.difference.max.ms, the one bound
// of brokers before 3.6, binds both ways.
func (b *stampBounds) set(key, value string) {
	switch key {
	case "message.timestamp.type":
		b.logAppend = value == "LogAppendTime"
	case "message.timestamp.before.max.ms":
		if d, ok := readBound(value); ok {
			b.before = min(b.before, d)
		}
	case "message.timestamp.after.max.ms":
		if d, ok := readBound(value); ok {
			b.after = min(b.after, d)
		}
	case "message.timestamp.difference.max.ms":
		if d, ok := readBound(value); ok {
			b.before, b.after = min(b.before, d), min(b.after, d)
		}
	}
}

// outside reports whether a record stamped ts, handed to the client at
// now, may reach the broker outside the bounds: within margin of them,
// where margin is half the bound, at most slack (the record's wait in the
// client and the clocks' difference).
//
// N.B. a before bound of 0 accepts no timestamp behind the broker's clock,
// the current time's neither: such a topic rejects every record, and the
// records stay as they are (rejected, then dead-lettered).
func (b stampBounds) outside(ts, now time.Time, slack time.Duration) bool {
	if b.logAppend {
		return false
	}
	if b.before > 0 && b.before != unbounded && now.Sub(ts) > b.before-min(b.before/2, slack) {
		return true
	}
	return b.after != unbounded && ts.Sub(now) > b.after-min(b.after/2, slack)
}

// stampSlack is how long a record may take from being stamped to the
// broker's check, clocks' difference included: its wait for
// acknowledgement is bounded by the delivery timeout.
func (c Config) stampSlack() time.Duration { return 2 * c.DeliveryTimeout }

// stamper decides the timestamps of one part's records.
type stamper struct {
	now    time.Time
	commit []byte // the header value, made once per part
}

// stamp sets r's timestamp to the commit time unless the topic's bounds
// (or a rejection, Isolation.stampNow) say otherwise; then to the current
// time, with the commit time in HeaderCommitTime appended to hdrs. It
// returns hdrs.
func (s *Sink) stamp(st *stamper, r *kgo.Record, commitLSN pglogrepl.LSN, commit time.Time, hdrs []kgo.RecordHeader) []kgo.RecordHeader {
	r.Timestamp = commit
	if st.now.IsZero() {
		st.now = s.now
	}
	forced := s.stampTopics != nil && commitLSN <= s.stampThrough && s.stampTopics[r.Topic]
	if !forced && !s.limits.bounds(r.Topic).outside(commit, st.now, s.cfg.stampSlack()) {
		return hdrs
	}
	if st.commit == nil {
		st.commit = strconv.AppendInt(nil, commit.UnixMilli(), 10)
	}
	// N.B. one time for the part's records, as they share one commit
	// time: the part's wait for room under MaxInflightBytes is within
	// the slack.
	r.Timestamp = st.now
	s.metrics.Restamped()
	return append(hdrs, kgo.RecordHeader{Key: HeaderCommitTime, Value: st.commit})
}

// stampRetries is how often the records of a topic are stamped with the
// current time again after Kafka rejected their timestamps, before a
// rejection counts as the record's (dead-lettered, or it halts): a topic
// whose bounds no clock meets, or brokers whose clocks are far from this
// host's.
const stampRetries = 3

// timestampRetry is the error to fail the sink with when Kafka rejected
// the timestamp (err) of r, a record stamped by walrelay (own: it may
// carry its event's own timestamp): the relay restarts, reads the topic's
// bounds again and stamps its records up to the newest transaction begun
// with the current time. nil when the rejection stands.
func (s *Sink) timestampRetry(r *kgo.Record, err error, own bool) error {
	if own || !errors.Is(err, kerr.InvalidTimestamp) {
		return nil
	}
	if b := s.limits.bounds(r.Topic); b.before == 0 {
		return nil
	}
	// N.B. franz-go fails every buffered record of the partition with
	// the batch's error: one request, and one decision, per topic and sink.
	s.stampMu.Lock()
	defer s.stampMu.Unlock()
	if retry, ok := s.stampAsked[r.Topic]; ok {
		return retry
	}
	through := pglogrepl.LSN(s.lastCommit.Load())
	tries := s.iso.stampNow(r.Topic, through)
	var retry error
	defer func() {
		if s.stampAsked == nil {
			s.stampAsked = map[string]error{}
		}
		s.stampAsked[r.Topic] = retry
	}()
	if tries > stampRetries {
		s.log.Warn("kafka rejected the current time as the timestamp of records again: the brokers' clocks may differ from this host's by more than the topic's message.timestamp.before.max.ms or after.max.ms; its records are now isolated and dead-lettered",
			zap.String("topic", r.Topic), zap.Int("tries", tries))
		return nil
	}
	retry = fmt.Errorf("produce to topic %s partition %d: %w: kafka rejected the timestamp of a record; restarting from the confirmed position, its topic's bounds read again and its records up to commit lsn %s stamped with the current time (header %s keeps the commit time)",
		r.Topic, r.Partition, err, through, HeaderCommitTime)
	return retry
}
