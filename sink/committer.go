package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
)

// Exactly-once's commits: a Kafka transaction ends, with its checkpoint
// record, between two PostgreSQL transactions, when it is due (commit);
// the committer commits it when no Produce call does.

// committer commits the open Kafka transaction when it is due and no
// PostgreSQL transaction is being handed over, and fails the sink when one
// takes too long for the transaction timeout.
func (e *exactlyOnce) committer() {
	s := e.s
	tick := time.NewTicker(max(s.cfg.CommitInterval/2, 5*time.Millisecond))
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer cancel()
		select {
		case <-s.failed:
			// N.B. failed (aborted, fenced, a record lost): a commit or
			// fencing in flight gives up at once, or an abort would wait
			// for a Kafka that does not answer; its outcome is left to
			// the next producer of the transactional id (unsure).
		case <-s.closing:
			// N.B. a commit in flight may finish: its outcome then is
			// known (a zombie learns it was fenced), and Close waits
			// for it.
			select {
			case <-time.After(5 * time.Second):
			case <-s.failed:
			}
		}
	}()
	select {
	case <-s.closing:
		return
	case <-s.failed:
		return
	case <-e.activate:
	}
	e.lock()
	err := e.init(ctx)
	e.unlock()
	if err != nil {
		s.fail(err)
		return
	}
	for {
		select {
		case <-s.closing:
			return
		case <-s.failed:
			return
		case <-tick.C:
		}
		if b := e.began.Load(); b != 0 && e.inPG.Load() && time.Since(time.Unix(0, b)) > s.cfg.txnLimit() {
			// N.B. the broker would abort the transaction at its timeout;
			// walrelay gives up first, and says which transaction and what
			// to raise.
			s.fail(fmt.Errorf("%w: transaction xid %d (commit lsn %s, %d records handed over so far) was not relayed within 3/4 of --kafka-transaction-timeout %s: raise --kafka-transaction-timeout (at most the broker's transaction.max.timeout.ms, default 15m) or commit smaller transactions; nothing of it is committed or confirmed",
				ErrTransactionTooLong, e.curXid.Load(), pglogrepl.LSN(e.curLSN.Load()), e.curRecs.Load(), s.cfg.TransactionTimeout))
			return
		}
		if !e.tryLock() {
			continue
		}
		if !e.inPG.Load() && e.due() {
			e.commit(ctx) // its failure fails the sink
		}
		e.unlock()
	}
}

// commit writes the checkpoint, waits for every record of the Kafka
// transaction and commits it; then the transactions in it may be confirmed.
// Called with e.mu held, between PostgreSQL transactions.
func (e *exactlyOnce) commit(ctx context.Context) error {
	s := e.s
	if !e.open {
		return nil
	}
	if len(e.txs) > 0 {
		r := kafkastate.CheckpointRecord(s.cfg.CheckpointTopic, s.deps.Source, kafkastate.Checkpoint{
			Slot: s.deps.Source.Slot, Database: s.deps.Source.Database, SystemIdentifier: s.deps.Source.SystemID,
			EndLSN: e.lastEnd.String(), CommitLSN: e.lastCom.String(), Timeline: s.deps.Source.Timeline, TransactionalID: s.cfg.TransactionalID,
			Transactions: len(e.txs), Records: e.records, WrittenAt: time.Now().UTC(),
		})
		// N.B. timed by the watchdog like any record.
		h := s.clock.open(time.Now())
		h.pending.Add(1)
		s.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			h.pending.Add(-1)
			if err != nil {
				s.metrics.Failure()
				s.fail(fmt.Errorf("produce checkpoint to topic %s: %w", r.Topic, fenced(err)))
			}
		})
		s.clock.seal(h)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.failed:
			cancel()
		case <-s.closing:
			cancel()
		case <-fctx.Done():
		}
	}()
	if err := s.cl.Flush(fctx); err != nil {
		if serr := s.Err(); serr != nil {
			return serr
		}
		return fmt.Errorf("flush kafka transaction: %w", err)
	}
	if err := s.Err(); err != nil {
		return err
	}
	// N.B. never retried: an error leaves the outcome to the checkpoint,
	// which the next attempt reads after fencing this producer.
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		err = fmt.Errorf("commit kafka transaction of %d postgresql transactions through end lsn %s: %w", len(e.txs), e.lastEnd, fenced(err))
		if errors.Is(err, ErrFenced) {
			// N.B. logged here: the attempt may end on another error
			// first (a zombie's replication connection is gone too).
			s.log.Error("kafka transaction not committed: fenced", zap.String("transactional_id", s.cfg.TransactionalID), zap.Error(err))
		}
		e.unsure = true
		s.metrics.Failure()
		s.fail(err)
		return err
	}
	e.open = false
	e.began.Store(0)
	s.metrics.KafkaTransaction("committed")
	if len(e.txs) > 0 {
		e.checkpoint = e.lastEnd
	}
	s.metrics.Checkpoint(uint64(e.checkpoint), uint64(e.lastEnd))
	for _, x := range e.txs {
		x.Ack()
	}
	clear(e.txs)
	e.txs, e.records = e.txs[:0], 0
	return nil
}
