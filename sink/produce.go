package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/kafkastate"
)

// Produce hands one Tx part to Kafka asynchronously: the delivery
// strategy begins it (a part a checkpoint covers is done here), admission
// decides what becomes of each event (admit.go), and its records are
// handed to the client. It blocks only while MaxInflightBytes are
// buffered, or for each record it isolates. A part whose events include a
// poison event halts: its earlier events are produced, nothing from the
// poison event on.
func (s *Sink) Produce(ctx context.Context, tx *decode.Tx) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.delivery.lock()
	defer s.delivery.unlock()
	if skip, err := s.delivery.begin(ctx, tx); skip || err != nil {
		return err
	}
	s.now = time.Now()
	if err := s.beginPart(tx); err != nil {
		return err
	}
	if s.deps.Null {
		return s.produceNull(tx)
	}
	defer s.sealHandoff()
	if err := s.produceEvents(ctx, tx); err != nil {
		return err
	}
	if tx.Last {
		s.cur.Close(tx.EndLSN)
		s.cur = nil
		return s.delivery.last(ctx, tx)
	}
	return nil
}

// beginPart registers a transaction's first part with the tracker, ending
// an isolation that its commit LSN is past.
func (s *Sink) beginPart(tx *decode.Tx) error {
	if tx.First {
		if s.stampTopics != nil && s.tracker.Watermark() > s.stampThrough {
			// N.B. the records stamped with the current time were
			// acknowledged: a later rejection is a new one.
			s.iso.stampsDone(s.stampThrough)
			s.stampThrough, s.stampTopics = 0, nil
		}
		if s.isoTopics.Load() != nil && tx.CommitLSN > s.isoThrough {
			// N.B. every isolated record before this transaction was
			// acknowledged (or dead-lettered) one at a time.
			s.iso.finish(s.isoThrough)
			s.log.Info("isolation done: producing in batches again", zap.Stringer("through_commit_lsn", s.isoThrough))
			s.isoThrough = 0
			s.isoTopics.Store(nil)
		}
		s.cur = s.tracker.BeginAt(tx.CommitLSN, s.now)
		s.evIndex = 0
		s.lastCommit.Store(uint64(tx.CommitLSN))
	}
	if s.cur == nil {
		return fmt.Errorf("transaction %d part without its first part", tx.Xid)
	}
	return nil
}

// produceEvents checks the part's topics, admits each event and carries
// its verdict out.
func (s *Sink) produceEvents(ctx context.Context, tx *decode.Tx) error {
	refused, err := s.ensureTopics(ctx, tx.Events)
	if err != nil {
		return err
	}
	n := len(tx.Events)
	if n == 0 {
		return nil
	}
	if err := s.delivery.join(s.cur, n); err != nil {
		return err
	}
	g := s.gate(refused)
	extra := len(tx.Events[0].Headers) + 1
	recs := make([]kgo.Record, n)
	hdrs := make([]kgo.RecordHeader, 0, n*extra)
	meta := partMeta(tx)
	var a *txAcks
	var st stamper
	for i := range tx.Events {
		ev := &tx.Events[i]
		var r *kgo.Record
		start := len(hdrs)
		if ev.Err == nil {
			r = &recs[i]
			hdrs = s.record(r, tx, ev, hdrs, &st)
		}
		v := g.admit(tx, ev, r, false)
		if v.outcome == recount {
			if err := s.recountPartitions(ctx, ev.Topic); err != nil {
				s.traceAcked(r, err) // trace.go
				return err
			}
			s.now = time.Now()
			v = g.admit(tx, ev, r, true)
		}
		if v.cause == causeBadPartition {
			hdrs = hdrs[:start]
			ev.Err, ev.Reason = v.why, v.reason
			s.traceDeadLettered(r, v.why) // trace.go
		}
		pos := kafkastate.Pos{LSN: tx.CommitLSN, Index: s.evIndex + uint32(i)}
		s.curEv, s.curPos = ev, pos // for parkRejected
		if v = g.park(v, ev, pos); v.outcome == parkNew || v.outcome == parkBehind {
			a, err = s.parkEvent(ctx, tx, ev, r, v, pos, a, meta)
		} else {
			a, err = s.deliver(ctx, tx, ev, r, v, a, meta)
		}
		if err != nil {
			s.traceAcked(r, err) // trace.go: not produced (a span ended already stays so)
			return err
		}
		if v.outcome != produce || v.cause != causeNone {
			// N.B. an event that is not simply handed over may have
			// waited (isolated, dead-lettered, parked, its partitions
			// counted): the next records are timed anew.
			s.now = time.Now()
		}
	}
	s.evIndex += uint32(n)
	s.lingering = true
	if s.cfg.Linger > 0 {
		s.rate.Count(s.now)
	}
	if s.fresh {
		// N.B. the first records of a topic wait for the client to
		// load its partitions, and then for their linger: ending the
		// lingers later (Send) would miss them.
		s.fresh = false
		s.sendLingering()
	}
	return nil
}

// record fills r with ev's record, its headers appended to hdrs, and
// returns hdrs. Its timestamp is the event's own, else the commit time
// within the topic's bounds (stamp).
func (s *Sink) record(r *kgo.Record, tx *decode.Tx, ev *decode.Event, hdrs []kgo.RecordHeader, st *stamper) []kgo.RecordHeader {
	start := len(hdrs)
	r.Topic = ev.Topic
	r.Key = ev.Key
	r.Value = ev.Value
	r.Context = s.held
	// N.B. the trace headers first: Debezium injects them into the change
	// event before its router adds id and the additional headers.
	if t := s.deps.Tracer; t != nil && ev.TraceContext != nil {
		hdrs = t.Record(tx, ev, r, hdrs) // trace.go
	}
	hdrs = append(hdrs, kgo.RecordHeader{Key: "id", Value: ev.ID})
	for _, h := range ev.Headers {
		hdrs = append(hdrs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if ev.Timestamp.IsZero() {
		hdrs = s.stamp(st, r, tx.CommitLSN, tx.CommitTime, hdrs)
	} else {
		// N.B. an event's own timestamp (--timestamp-column) is row
		// data: one the broker refuses is the event's fault.
		r.Timestamp = ev.Timestamp
		if _, ok := s.eventStamped.Load(r.Topic); !ok {
			s.eventStamped.Store(r.Topic, true)
		}
	}
	r.Headers = hdrs[start:len(hdrs):len(hdrs)]
	return hdrs
}

// deliver carries out verdict v on event ev of part tx (record r), with
// the part's promise a; it returns the promise for the next record.
func (s *Sink) deliver(ctx context.Context, tx *decode.Tx, ev *decode.Event, r *kgo.Record, v verdict, a *txAcks, meta recordMeta) (*txAcks, error) {
	switch {
	case v.outcome == halt:
		return a, haltError(tx, ev, v)
	case v.cause == causePoison || v.cause == causeBadPartition:
		return s.poison(ctx, tx, ev, v.reason, a, meta)
	case v.cause == causeTopicRefused:
		return s.refuseRecord(ctx, tx, r, v.why, a, meta)
	}
	if ev.HasPartition {
		r.Partition = explicitPartition(ev.Partition)
	}
	switch {
	case v.cause == causeTooLarge:
		return s.rejectRecord(ctx, tx, r, v.why, "record too large for its topic: dead-lettered", a, meta)
	case v.outcome == isolate:
		return a, s.produceIsolated(ctx, tx, r, !ev.Timestamp.IsZero(), meta)
	}
	a, err := s.handOver(ctx, r, a, meta)
	if err != nil {
		return a, err
	}
	s.cur.Add(1)
	s.cl.Produce(ctx, r, a.done)
	return a, nil
}

// haltError is the error the relay halts with on event ev (--on-poison=halt).
func haltError(tx *decode.Tx, ev *decode.Event, v verdict) error {
	if v.cause == causePoison || v.cause == causeBadPartition {
		return fmt.Errorf("%w: table %s, xid %d, commit lsn %s, id %q: %w (--on-poison=halt: nothing from this event on is confirmed)",
			ErrPoison, ev.Table, tx.Xid, tx.CommitLSN, ev.ID, v.why)
	}
	return fmt.Errorf("%w: xid %d, commit lsn %s: %w (--on-poison=halt: nothing from this event on is confirmed)", ErrPoison, tx.Xid, tx.CommitLSN, v.why)
}

// handOver reserves r's bytes and counts r in the open handoff, returning
// the promise to produce it with (a, or a new one when the handoff
// changed).
func (s *Sink) handOver(ctx context.Context, r *kgo.Record, a *txAcks, meta recordMeta) (*txAcks, error) {
	cost := recordCost(r)
	if !s.budget.TryAcquire(cost) {
		// N.B. waiting for room is not waiting for Kafka: the handoff is
		// sealed meanwhile, and the records after the wait are timed anew
		// unless the handoff is still young.
		s.sealHandoff()
		// N.B. room is made by acknowledgements: records left to linger
		// would hold it until their linger ends.
		s.sendLingering()
		if !s.budget.Acquire(ctx, cost, s.failed) {
			if err := s.Err(); err != nil {
				return nil, err
			}
			return nil, ctx.Err()
		}
		s.now = time.Now()
	}
	if s.h == nil || s.hn >= handoffRecords {
		s.sealHandoff()
		if l := s.last; l != nil && s.hn < handoffRecords && s.now.Sub(l.at) < s.handoffAge && l.reopen() {
			s.h = l
		} else {
			s.h, s.hn = s.clock.open(s.now), 0
		}
		s.last = nil
	}
	if a == nil || a.h != s.h {
		a = &txAcks{s: s, x: s.cur, meta: meta, h: s.h, handed: s.now}
	}
	s.hn++
	s.h.pending.Add(1)
	return a, nil
}

// sealHandoff ends the open handoff; the next records may reopen it.
func (s *Sink) sealHandoff() {
	if s.h != nil {
		s.clock.seal(s.h)
		s.last, s.h = s.h, nil
	}
}

// produceNull acknowledges the part's events without producing them.
func (s *Sink) produceNull(tx *decode.Tx) error {
	for i := range tx.Events {
		if ev := &tx.Events[i]; ev.Err != nil {
			return fmt.Errorf("%w: table %s, xid %d: %w", ErrPoison, ev.Table, tx.Xid, ev.Err)
		}
	}
	if n := len(tx.Events); n > 0 {
		s.cur.Add(n)
		for range n {
			s.cur.Ack()
		}
	}
	if tx.Last {
		s.cur.Close(tx.EndLSN)
		s.cur = nil
	}
	return nil
}

// partMeta describes a Tx part for dead-letter headers.
func partMeta(tx *decode.Tx) recordMeta {
	table := ""
	for i := range tx.Events {
		switch t := tx.Events[i].Table; {
		case table == "":
			table = t
		case table != t:
			table = "(several)"
		}
	}
	return recordMeta{table: table, commitLSN: tx.CommitLSN, xid: tx.Xid, commitTime: tx.CommitTime}
}
