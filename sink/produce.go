package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
)

// Produce hands one Tx part to Kafka asynchronously. It blocks only while
// MaxInflightBytes are buffered, or for each record it isolates. A part
// whose events include a poison event halts: its earlier events are
// produced, nothing from the poison event on.
func (s *Sink) Produce(ctx context.Context, tx *decode.Tx) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.delivery.lock()
	defer s.delivery.unlock()
	if skip, err := s.delivery.begin(ctx, tx); skip || err != nil {
		return err
	}
	if tx.First {
		if s.isoTopics.Load() != nil && tx.CommitLSN > s.isoThrough {
			// N.B. every isolated record before this transaction was
			// acknowledged (or dead-lettered) one at a time.
			s.iso.finish(s.isoThrough)
			s.log.Info("isolation done: producing in batches again", zap.Stringer("through_commit_lsn", s.isoThrough))
			s.isoThrough = 0
			s.isoTopics.Store(nil)
		}
		s.cur = s.tr.Begin(tx.CommitLSN)
		s.lastCommit.Store(uint64(tx.CommitLSN))
	}
	if s.cur == nil {
		return fmt.Errorf("transaction %d part without its first part", tx.Xid)
	}
	if s.cfg.Null {
		return s.produceNull(tx)
	}
	refused, err := s.ensureTopics(ctx, tx.Events)
	if err != nil {
		return err
	}
	if n := len(tx.Events); n > 0 {
		if err := s.delivery.join(s.cur, n); err != nil {
			return err
		}
		defer s.sealHandoff()
		extra := len(tx.Events[0].Headers) + 1
		recs := make([]kgo.Record, n)
		hdrs := make([]kgo.RecordHeader, 0, n*extra)
		meta := partMeta(tx)
		var a *txAcks
		for i := range tx.Events {
			ev := &tx.Events[i]
			if ev.Err != nil {
				if a, err = s.poison(ctx, tx, ev, a, meta); err != nil {
					return err
				}
				continue
			}
			start := len(hdrs)
			hdrs = append(hdrs, kgo.RecordHeader{Key: "id", Value: ev.ID})
			for _, h := range ev.Headers {
				hdrs = append(hdrs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			r := &recs[i]
			r.Topic = ev.Topic
			r.Key = ev.Key
			r.Value = ev.Value
			r.Headers = hdrs[start:len(hdrs):len(hdrs)]
			r.Timestamp = tx.CommitTime
			r.Context = s.held
			if why := refused[r.Topic]; why != nil {
				if a, err = s.refuseRecord(ctx, tx, r, why, a, meta); err != nil {
					return err
				}
				continue
			}
			if !ev.Timestamp.IsZero() {
				r.Timestamp = ev.Timestamp
			}
			if ev.HasPartition {
				poison, err := s.checkPartition(ctx, ev)
				if err != nil {
					return err
				}
				if poison != nil {
					hdrs = hdrs[:start]
					ev.Err = poison
					if a, err = s.poison(ctx, tx, ev, a, meta); err != nil {
						return err
					}
					continue
				}
				r.Partition = explicitPartition(ev.Partition)
			}
			if limit := s.known[r.Topic]; loneBatchBytes(r) > int(limit) {
				// N.B. too large for its topic on its own, so in any batch:
				// the client would fail it alone (kerr.MessageTooLarge).
				if a, err = s.rejectTooLarge(ctx, tx, r, limit, a, meta); err != nil {
					return err
				}
				continue
			}
			if s.isolated(tx, r.Topic) {
				if err := s.produceIsolated(ctx, tx, r, meta); err != nil {
					return err
				}
				continue
			}
			if a, err = s.handOver(ctx, r, a, meta); err != nil {
				return err
			}
			s.cur.Add(1)
			s.cl.Produce(ctx, r, a.done)
		}
		s.lingering = true
		if s.cfg.Linger > 0 {
			s.rate.Count(time.Now())
		}
		if s.fresh {
			// N.B. the first records of a topic wait for the client to
			// load its partitions, and then for their linger: ending the
			// lingers later (Send) would miss them.
			s.fresh = false
			s.sendLingering()
		}
	}
	if tx.Last {
		s.cur.Close(tx.EndLSN)
		s.cur = nil
		return s.delivery.last(ctx, tx)
	}
	return nil
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
	}
	if s.h == nil || s.hn >= handoffRecords {
		s.sealHandoff()
		if l := s.last; l != nil && s.hn < handoffRecords && time.Since(l.at) < s.handoffAge && l.reopen() {
			s.h = l
		} else {
			s.h, s.hn = s.clock.open(), 0
		}
		s.last = nil
	}
	if a == nil || a.h != s.h {
		a = &txAcks{s: s, x: s.cur, meta: meta, h: s.h, handed: time.Now()}
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
