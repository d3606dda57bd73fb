package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/kafkastate"
)

// Parking (--on-poison=park): a poison event is dead-lettered and its
// aggregate (its topic and key) parked, so that the aggregate's later
// events go to the dead-letter topic behind it, in commit order, instead
// of overtaking it; every other aggregate flows. Each parked event's
// dead letter and the aggregate's park record on the state topic
// (kafkastate.Park) are acknowledgements of its transaction: the slot is
// never confirmed past a parked event before both are in Kafka (and, with
// --exactly-once, they are in its Kafka transaction). An event without a
// key (or a topic) names no aggregate: it is dead-lettered as with
// --on-poison=dead-letter and counted (walrelay_events_dead_lettered_total).
// walrelay dlq redrive re-publishes the parked events and writes a
// release record; the sink follows the state topic and un-parks the
// aggregate once a release covers every event it parked (parkfollow.go).

// OnPoisonPark dead-letters a poison event and parks its aggregate.
const OnPoisonPark = "park"

// Headers of a parked event's dead letter, besides the dead-letter ones.
const (
	// HeaderParkedAggregate is the aggregate's kafkastate.Aggregate ID.
	HeaderParkedAggregate = "walrelay.parked.aggregate"
	// HeaderParkedBehind is the id of the event that parked the aggregate.
	HeaderParkedBehind = "walrelay.parked.behind"
	// HeaderPosition is the event's commit position (kafkastate.Pos).
	HeaderPosition = "walrelay.position"
	// HeaderOriginalHeaders counts the record's own headers, which come
	// first: a dead letter with it holds the record as it was (key, value,
	// timestamp, headers) and can be re-published.
	HeaderOriginalHeaders = "walrelay.original.headers"
	// HeaderPartition is the record's own partition (--partition-column);
	// absent: its key picks it.
	HeaderPartition = "walrelay.original.partition"
)

// ReasonParked is the walrelay.error.class of an event dead-lettered
// only because its aggregate is parked.
const ReasonParked = "parked"

// parkSet is the sink's parked aggregates (one slot's), by
// kafkastate.Aggregate ID: the producing goroutine parks, the follower
// applies releases; mu guards both.
type parkSet struct {
	mu    sync.Mutex
	state kafkastate.ParkState
	n     atomic.Int32 // aggregates parked now: 0 skips the lookup
}

// lookup reports whether the aggregate of topic and key is parked for an
// event at pos: parked, and pos is not before the event that parked it
// (an event before it, replayed after a restart, flows as it did).
func (p *parkSet) lookup(src kafkastate.Source, topic string, key []byte, pos kafkastate.Pos) bool {
	if p == nil || p.n.Load() == 0 {
		return false
	}
	id := kafkastate.Aggregate{SystemID: src.SystemID, Database: src.Database, Slot: src.Slot, Topic: topic, Key: key}.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.state.Get(id)
	return a != nil && a.IsParked() && pos.Compare(a.Park.Start) >= 0
}

// mark parks the aggregate agg for its event at pos (a poison event when
// first): a new episode when it is not parked, else the episode goes
// through pos. It returns the park record to write.
func (p *parkSet) mark(agg kafkastate.Aggregate, pos kafkastate.Pos, id, reason, msg string, now time.Time) kafkastate.Park {
	p.mu.Lock()
	defer p.mu.Unlock()
	aid := agg.ID()
	a := p.state.Get(aid)
	var k kafkastate.Park
	if a != nil && a.IsParked() {
		k = *a.Park
		// N.B. an event at or before Through is one parked already,
		// relayed again after a restart: counted once.
		if k.Through.Compare(pos) < 0 {
			k.Through = pos
			k.Events++
		}
	} else {
		k = kafkastate.Park{Aggregate: agg, Start: pos, Through: pos, FirstEventID: id, Reason: reason, Message: msg, Events: 1, ParkedAt: now}
	}
	k.UpdatedAt = now
	p.state.SetPark(aid, &k)
	p.recount()
	return k
}

// recount counts the parked aggregates; called with mu held.
func (p *parkSet) recount() {
	n := 0
	for _, a := range p.state.All() {
		if a.IsParked() {
			n++
		}
	}
	p.n.Store(int32(n))
}

// parking reports whether --on-poison=park is on.
func (s *Sink) parking() bool { return s.cfg.OnPoison == OnPoisonPark }

// parkEvent dead-letters event ev at pos (record r, nil when it has none)
// behind its parked aggregate, or parks the aggregate with it (v.outcome
// parkNew), and writes the aggregate's park record; both acknowledge the
// event's transaction.
func (s *Sink) parkEvent(ctx context.Context, tx *decode.Tx, ev *decode.Event, r *kgo.Record, v verdict, pos kafkastate.Pos, a *txAcks, meta recordMeta) (*txAcks, error) {
	src := s.deps.Source
	agg := kafkastate.Agg(src, ev.Topic, ev.Key)
	reason, msg := v.reason, ""
	if v.why != nil {
		msg = v.why.Error()
	}
	if v.outcome == parkBehind && reason == "" {
		reason = ReasonParked
	}
	park := s.parks.mark(agg, pos, string(ev.ID), reason, msg, time.Now())
	if v.why != nil {
		s.traceDeadLettered(r, v.why) // trace.go
	} else {
		s.traceDeadLettered(r, fmt.Errorf("parked behind event %s at %s", park.FirstEventID, park.Start))
	}
	if ev.Err != nil {
		r = nil // a bad partition's record headers were given back
	}
	dl, err := s.parkedLetter(tx, ev, r, reason, msg, park, pos, meta)
	if err != nil {
		return a, err
	}
	if v.outcome == parkNew {
		s.log.Warn("poison event: dead-lettered, and its aggregate parked behind it", zap.String("topic", ev.Topic), zap.ByteString("key", ev.Key),
			zap.String("table", ev.Table), zap.Uint32("xid", tx.Xid), zap.Stringer("commit_lsn", tx.CommitLSN), zap.ByteString("id", ev.ID), zap.String("reason", reason), zap.String("error", msg))
	} else if ce := s.log.Check(zap.DebugLevel, "event parked"); ce != nil {
		ce.Write(zap.String("topic", ev.Topic), zap.ByteString("key", ev.Key), zap.Stringer("position", pos))
	}
	s.metrics.DeadLetter(reason)
	s.reportParks()
	if a, err = s.produceDeadLetter(ctx, dl, a, meta); err != nil {
		return a, err
	}
	return s.produceDeadLetter(ctx, kafkastate.ParkRecord(s.cfg.CheckpointTopic, park), a, meta)
}

// parkedLetter is the dead letter of a parked event: the record as it was
// (its headers first, counted in HeaderOriginalHeaders) when it has one
// and that fits the dead-letter topic, so that walrelay dlq redrive can
// re-publish it; otherwise the dead letter of --on-poison=dead-letter.
// Either carries the park headers.
func (s *Sink) parkedLetter(tx *decode.Tx, ev *decode.Event, r *kgo.Record, reason, msg string, park kafkastate.Park, pos kafkastate.Pos, meta recordMeta) (*kgo.Record, error) {
	parkHdrs := []kgo.RecordHeader{
		{Key: HeaderParkedAggregate, Value: []byte(park.ID())},
		{Key: HeaderParkedBehind, Value: []byte(park.FirstEventID)},
		{Key: HeaderPosition, Value: []byte(pos.String())},
	}
	if msg == "" {
		msg = "parked behind event " + park.FirstEventID + " at " + park.Start.String()
	}
	if r != nil {
		if dl := s.recordLetter(tx, ev, r, reason, msg, parkHdrs); dl != nil {
			return dl, nil
		}
		s.log.Warn("parked event larger than the dead-letter topic accepts: its dead letter cannot be re-published", zap.String("topic", r.Topic),
			zap.Stringer("position", pos), zap.Int32("limit", s.deadLetterLimit()))
	}
	var dl *kgo.Record
	var err error
	if ev.Err != nil {
		dl, err = s.deadLetterEvent(tx, ev)
	} else {
		dl, err = s.deadLetterRejected(r, fmt.Errorf("%s", msg), meta)
	}
	if err != nil {
		return nil, err
	}
	for i := range dl.Headers {
		if dl.Headers[i].Key == HeaderErrorClass {
			dl.Headers[i].Value = []byte(reason)
		}
	}
	dl.Headers = append(dl.Headers, parkHdrs...)
	return dl, nil
}

// recordLetter is the dead letter that holds record r as it was (key,
// value, timestamp, its own headers first, counted in
// HeaderOriginalHeaders) with the dead-letter headers after them, tail
// last, so that walrelay dlq redrive can re-publish it; nil when it is
// larger than the dead-letter topic accepts.
func (s *Sink) recordLetter(tx *decode.Tx, ev *decode.Event, r *kgo.Record, reason, msg string, tail []kgo.RecordHeader) *kgo.Record {
	dl := &kgo.Record{Topic: s.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	dl.Headers = append(dl.Headers, r.Headers...)
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: HeaderOriginalHeaders, Value: strconv.AppendInt(nil, int64(len(r.Headers)), 10)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderErrorClass, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderTable, Value: []byte(ev.Table)},
		kgo.RecordHeader{Key: HeaderCommitLSN, Value: []byte(tx.CommitLSN.String())},
		kgo.RecordHeader{Key: HeaderXid, Value: strconv.AppendUint(nil, uint64(tx.Xid), 10)},
		kgo.RecordHeader{Key: HeaderEventID, Value: ev.ID})
	if ev.HasPartition {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(ev.Partition), 10)})
	}
	dl.Headers = append(dl.Headers, tail...)
	if loneBatchBytes(dl) > int(s.deadLetterLimit()) {
		return nil
	}
	return dl
}

// deadLetterLimit is the largest batch the dead-letter topic accepts.
func (s *Sink) deadLetterLimit() int32 {
	if l, ok := s.known[s.cfg.DeadLetterTopic]; ok {
		return l
	}
	return s.cfg.MaxMessageBytes
}

// parkRejected parks the aggregate of record r, isolated (produced alone
// and waited for) and rejected by Kafka on its own (why): its dead letter
// and park record are produced and waited for likewise, before the next
// event is admitted.
func (s *Sink) parkRejected(ctx context.Context, tx *decode.Tx, r *kgo.Record, why error, meta recordMeta) error {
	ev, pos := s.curEv, s.curPos
	reason := deadLetterReason(why)
	park := s.parks.mark(kafkastate.Agg(s.deps.Source, r.Topic, r.Key), pos, string(ev.ID), reason, why.Error(), time.Now())
	dl, err := s.parkedLetter(tx, ev, r, reason, why.Error(), park, pos, meta)
	if err != nil {
		return err
	}
	s.log.Warn("record rejected by Kafka on its own: dead-lettered, and its aggregate parked behind it", zap.String("topic", r.Topic),
		zap.ByteString("key", r.Key), zap.String("table", meta.table), zap.Stringer("commit_lsn", meta.commitLSN), zap.Error(why))
	s.metrics.DeadLetter(reason)
	for _, rec := range []*kgo.Record{dl, kafkastate.ParkRecord(s.cfg.CheckpointTopic, park)} {
		if err := s.produceAndWait(ctx, rec); err != nil {
			if errors.Is(err, errSinkDone) {
				return s.doneErr(ctx)
			}
			// N.B. an event that cannot be parked is never dropped: halt.
			s.metrics.Failure()
			return fmt.Errorf("%w: park produce to %s failed: %w", ErrPoison, rec.Topic, err)
		}
	}
	s.reportParks()
	s.cur.Ack()
	return nil
}
