package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/kafkastate"
)

// Exactly-once mode (Config.ExactlyOnce, --exactly-once).
//
// The records of one or more consecutive whole PostgreSQL transactions are
// produced inside one Kafka transaction (franz-go's transactional producer,
// transactional.id Config.TransactionalID) together with a checkpoint
// record on the compacted CheckpointTopic, key "eos/<system
// identifier>/<database>/<slot>", whose value names the end LSN of the last
// PostgreSQL transaction in it and the server's timeline. Each PostgreSQL
// transaction of a Kafka transaction holds one extra pending
// acknowledgement in the tracker,
// given only once the Kafka transaction committed: the slot is never
// confirmed past a transaction whose Kafka transaction did not commit.
//
// Once the replication stream holds the slot (HoldsSlot, or the first
// transaction), the sink initializes its producer id (fencing every other
// producer of the transactional id, and completing or aborting their open
// transaction), then reads the last checkpoint of its key with a
// read_committed consumer up to the last stable offset. Not before: a
// standby that fenced the instance streaming the slot would stop it
// without taking its place. Replication starts
// from the slot's confirmed_flush_lsn as always; every transaction the
// checkpoint covers (commit LSN below the checkpoint's end LSN, on the
// server's timeline; on another, below where the checkpoint's timeline
// ended in its history: timeline.go) is registered with the tracker
// without records and is not produced again.
//
// A PostgreSQL transaction is never split: a Kafka transaction is ended
// only between two of them. One that is still being handed over when the
// Kafka transaction has been open for 3/4 of TransactionTimeout fails the
// sink with ErrTransactionTooLong (the relay stops with exit 2); the Kafka
// transaction is aborted and nothing of it is confirmed.

// DefaultCheckpointTopic is the default CheckpointTopic: the topic of
// walrelay's slot markers (kafkastate.DefaultTopic).
const DefaultCheckpointTopic = kafkastate.DefaultTopic

// ErrTransactionTooLong is wrapped when a PostgreSQL transaction cannot be
// relayed within one Kafka transaction's timeout.
var ErrTransactionTooLong = errors.New("postgresql transaction too long for one kafka transaction")

// ErrFenced is wrapped when another producer with the same transactional
// id took over (or the broker aborted the transaction at its timeout,
// which bumps the epoch the same way): nothing of the open Kafka
// transaction is committed.
var ErrFenced = errors.New("fenced (a newer producer of the transactional id took over, or the broker aborted the transaction at its timeout)")

// ErrExactlyOnceSetup is wrapped when Kafka cannot give exactly-once as
// configured (no transactions, a checkpoint topic that is not compacted, a
// timeout the broker refuses): a person must fix it. It is kafkastate's,
// whose ReadCheckpoint wraps it too.
var ErrExactlyOnceSetup = kafkastate.ErrExactlyOnceSetup

// eos is the sink's exactly-once state.
type eos struct {
	// mu is held by Produce for a whole call and by the committer for a
	// commit: a Kafka transaction ends only between Produce calls.
	mu sync.Mutex

	ready      bool          // the producer id is initialized and the checkpoint read
	activate   chan struct{} // closed by HoldsSlot
	actOnce    sync.Once
	checkpoint pglogrepl.LSN // end LSN of the last committed checkpoint
	skipping   *checkpoint.Tx
	skipped    int

	open bool // a Kafka transaction is begun
	// unsure: a commit of it failed, so its state is not known here; it
	// is not aborted on Close (see abortOpen).
	unsure  bool
	txs     []*checkpoint.Tx // its PostgreSQL transactions, each holding one pending ack
	joined  bool             // the current PostgreSQL transaction is in txs
	records int
	lastEnd pglogrepl.LSN // of the last PostgreSQL transaction handed over whole
	lastCom pglogrepl.LSN

	began   atomic.Int64 // unix nanoseconds the Kafka transaction began; 0: none
	inPG    atomic.Bool  // a PostgreSQL transaction is being handed over
	curXid  atomic.Uint32
	curLSN  atomic.Uint64 // its commit LSN
	curRecs atomic.Int64
}

// startExactlyOnce ensures the checkpoint topic and starts the committer.
func (s *Sink) startExactlyOnce(ctx context.Context) error {
	if s.cfg.Source.Slot == "" {
		return fmt.Errorf("%w: no slot named for the checkpoint", ErrExactlyOnceSetup)
	}
	if err := s.ensureCheckpointTopic(ctx); err != nil {
		return err
	}
	go s.committer()
	return nil
}

// HoldsSlot tells the sink that the replication stream holds the slot: in
// exactly-once mode it then fences the older producers of its
// transactional id and reads the checkpoint, without waiting for the
// first transaction. Safe to call from any goroutine, more than once.
func (s *Sink) HoldsSlot() {
	if e := s.eos; e != nil {
		e.actOnce.Do(func() { close(e.activate) })
	}
}

// eosInit fences every older producer of the transactional id and reads
// the checkpoint, once; called with eos.mu held, while the stream holds
// the slot.
func (s *Sink) eosInit(ctx context.Context) error {
	if s.eos.ready {
		return nil
	}
	// N.B. the producer id first: InitProducerID fences every older
	// producer of this transactional id and completes or aborts its open
	// transaction, so that no commit can land after the checkpoint is read.
	if _, _, err := s.cl.ProducerID(ctx); err != nil {
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return fmt.Errorf("%w: init producer id: %w: lower --kafka-transaction-timeout (%s) to at most the broker's transaction.max.timeout.ms, or raise that", ErrExactlyOnceSetup, err, s.cfg.TransactionTimeout)
		}
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.UnsupportedVersion) {
			return fmt.Errorf("%w: init producer id for transactional id %q: %w (grant WRITE and DESCRIBE on the transactional id, on Kafka 0.11 or later)", ErrExactlyOnceSetup, s.cfg.TransactionalID, err)
		}
		return fmt.Errorf("init producer id for transactional id %q: %w", s.cfg.TransactionalID, err)
	}
	end, last, err := kafkastate.ReadCheckpoint(ctx, s.adm, s.baseOpts(), s.cfg.CheckpointTopic, s.cfg.Source)
	if err != nil {
		return err
	}
	cp, tli := end, int32(0)
	if last != nil {
		tli = last.Timeline
		cp = s.checkpointBound(end, tli)
	}
	s.eos.checkpoint = cp
	s.eos.ready = true
	s.metrics.Checkpoint(uint64(cp), uint64(cp))
	s.log.Info("exactly-once: checkpoint read; transactions ending at or before it are not produced again",
		zap.String("transactional_id", s.cfg.TransactionalID), zap.String("topic", s.cfg.CheckpointTopic),
		zap.String("key", kafkastate.CheckpointKey(s.cfg.Source)), zap.Stringer("end_lsn", end), zap.Int32("checkpoint_timeline", tli),
		zap.Int32("timeline", s.cfg.Source.Timeline), zap.Stringer("skip_bound", cp))
	return nil
}

// baseOpts connect a client of its own to the sink's brokers.
func (s *Sink) baseOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(s.cfg.ClientID),
		kgo.WithLogger(zapLogger{l: s.log.Named("kgo")}),
	}, s.cfg.Opts...)
}

// eosFirst handles the first part of a transaction: skipped if the
// checkpoint covers it; otherwise the open Kafka transaction is committed
// first when due.
func (s *Sink) eosFirst(ctx context.Context, tx *decode.Tx) (skip bool, err error) {
	e := s.eos
	// N.B. a transaction comes only from a stream that holds the slot.
	if err := s.eosInit(ctx); err != nil {
		return false, err
	}
	// N.B. commit records lie in commit order, and a transaction's commit
	// LSN lies below its end LSN: a transaction is at or below the
	// checkpoint (its end LSN <= the checkpoint's) exactly when its commit
	// LSN lies below the checkpoint's end LSN. Known at its first part.
	if tx.CommitLSN < e.checkpoint {
		if e.skipped == 0 {
			s.log.Info("exactly-once: skipping the transactions the checkpoint covers", zap.Stringer("commit_lsn", tx.CommitLSN), zap.Stringer("checkpoint", e.checkpoint))
		}
		e.skipping = s.tr.Begin(tx.CommitLSN)
		e.skipped++
		return true, nil
	}
	if e.skipped > 0 {
		s.log.Info("exactly-once: skipped the transactions the checkpoint covers", zap.Int("transactions", e.skipped))
		e.skipped = 0
	}
	if e.open && s.due() {
		if err := s.commit(ctx); err != nil {
			return false, err
		}
	}
	e.joined = false
	e.curXid.Store(tx.Xid)
	e.curLSN.Store(uint64(tx.CommitLSN))
	e.curRecs.Store(0)
	e.inPG.Store(true)
	return false, nil
}

// eosSkip ends a skipped part: a skipped transaction is confirmed as done.
func (s *Sink) eosSkip(tx *decode.Tx) {
	if tx.Last {
		if tx.EndLSN > s.eos.checkpoint {
			// Cannot happen (see eosFirst); said loudly if it does.
			s.log.Error("exactly-once: skipped a transaction ending past the checkpoint", zap.Stringer("end_lsn", tx.EndLSN), zap.Stringer("checkpoint", s.eos.checkpoint))
		}
		s.eos.skipping.Close(tx.EndLSN)
		s.eos.skipping = nil
		s.metrics.Skipped()
	}
}

// eosJoin opens the Kafka transaction if none is, and makes the current
// PostgreSQL transaction one of it, before its first record is produced.
func (s *Sink) eosJoin() error {
	e := s.eos
	if !e.open {
		if err := s.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin kafka transaction: %w", fenced(err))
		}
		e.open = true
		e.began.Store(time.Now().UnixNano())
	}
	if !e.joined {
		// N.B. the extra pending acknowledgement, given at the commit: the
		// watermark cannot pass this transaction before its Kafka
		// transaction committed.
		s.cur.Add(1)
		e.txs = append(e.txs, s.cur)
		e.joined = true
	}
	return nil
}

// eosLast ends the current PostgreSQL transaction, committing the Kafka
// transaction when it is due.
func (s *Sink) eosLast(ctx context.Context, tx *decode.Tx) error {
	e := s.eos
	e.inPG.Store(false)
	if !e.open {
		return nil
	}
	e.lastEnd, e.lastCom = tx.EndLSN, tx.CommitLSN
	s.metrics.Checkpoint(uint64(e.checkpoint), uint64(e.lastEnd))
	if s.due() {
		return s.commit(ctx)
	}
	return nil
}

// due reports whether the open Kafka transaction should be committed.
func (s *Sink) due() bool {
	e := s.eos
	return e.open && (e.records >= s.cfg.TransactionMaxRecords || time.Since(time.Unix(0, e.began.Load())) >= s.cfg.CommitInterval)
}

// commit writes the checkpoint, waits for every record of the Kafka
// transaction and commits it; then the transactions in it may be confirmed.
// Called with eos.mu held, between PostgreSQL transactions.
func (s *Sink) commit(ctx context.Context) error {
	e := s.eos
	if !e.open {
		return nil
	}
	if len(e.txs) > 0 {
		r := kafkastate.CheckpointRecord(s.cfg.CheckpointTopic, s.cfg.Source, kafkastate.Checkpoint{
			Slot: s.cfg.Source.Slot, Database: s.cfg.Source.Database, SystemIdentifier: s.cfg.Source.SystemID,
			EndLSN: e.lastEnd.String(), CommitLSN: e.lastCom.String(), Timeline: s.cfg.Source.Timeline, TransactionalID: s.cfg.TransactionalID,
			Transactions: len(e.txs), Records: e.records, WrittenAt: time.Now().UTC(),
		})
		// N.B. timed by the watchdog like any record.
		h := s.clock.open()
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

// fenced wraps ErrFenced around an error that says a newer producer took
// the transactional id.
func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// abortOpen aborts the open Kafka transaction, if any, when the sink is
// discarded, so that read_committed consumers do not wait for the
// broker's transaction timeout.
//
// N.B. not after a failed commit, nor once fenced: franz-go then aborts by
// initializing the producer id again at this producer's old epoch, and the
// coordinator, finding a newer producer's transaction ongoing, aborts that
// one and bumps the epoch before it refuses the old one. A resumed zombie
// thus fenced the walrelay that had taken its slot over (seen in
// TestZombieFencedExactlyOnce: the holder's produce refused with
// INVALID_PRODUCER_EPOCH 16 ms after the zombie's InitProducerID). Whoever
// holds the slot next initializes the producer id before producing, which
// aborts this transaction if it is still open.
func (s *Sink) abortOpen() {
	e := s.eos
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.open {
		return
	}
	if e.unsure || errors.Is(s.Err(), ErrFenced) {
		s.log.Debug("not aborting the kafka transaction: its commit failed or the producer was fenced; the next producer of the transactional id ends it", zap.String("transactional_id", s.cfg.TransactionalID))
		e.open = false
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cl.AbortBufferedRecords(ctx); err == nil {
		if err := s.cl.EndTransaction(ctx, kgo.TryAbort); err == nil {
			s.metrics.KafkaTransaction("aborted")
		} else {
			s.log.Debug("abort kafka transaction", zap.Error(err))
		}
	}
	e.open = false
}
