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

// exactlyOnce is the exactly-once delivery strategy and its state.
type exactlyOnce struct {
	s *Sink

	// mu is held by Produce for a whole call and by the committer for a
	// commit: a Kafka transaction ends only between Produce calls. A
	// one-slot channel, so that a flush stops waiting for it when its
	// context ends (a commit in flight to a Kafka that does not answer).
	mu chan struct{}

	ready      bool          // the producer id is initialized and the checkpoint read
	activate   chan struct{} // closed by HoldsSlot
	actOnce    sync.Once
	checkpoint pglogrepl.LSN // end LSN of the last committed checkpoint
	skipping   *checkpoint.Tx
	skipped    int

	open bool // a Kafka transaction is begun
	// unsure: a commit of it failed, so its state is not known here; it
	// is not aborted on Close (see close).
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

func newExactlyOnce(s *Sink) *exactlyOnce {
	return &exactlyOnce{s: s, activate: make(chan struct{}), mu: make(chan struct{}, 1)}
}

// start ensures the checkpoint topic and starts the committer.
func (e *exactlyOnce) start(ctx context.Context) error {
	s := e.s
	if s.deps.Source.Slot == "" {
		return fmt.Errorf("%w: no slot named for the checkpoint", ErrExactlyOnceSetup)
	}
	if err := s.ensureCheckpointTopic(ctx); err != nil {
		return err
	}
	go e.committer()
	return nil
}

// holdsSlot fences the older producers of the transactional id and reads
// the checkpoint (in the committer), without waiting for the first
// transaction.
func (e *exactlyOnce) holdsSlot() {
	e.actOnce.Do(func() { close(e.activate) })
}

func (e *exactlyOnce) lock()   { e.mu <- struct{}{} }
func (e *exactlyOnce) unlock() { <-e.mu }

func (e *exactlyOnce) tryLock() bool {
	select {
	case e.mu <- struct{}{}:
		return true
	default:
		return false
	}
}

// lockCtx takes mu unless ctx ends first.
func (e *exactlyOnce) lockCtx(ctx context.Context) error {
	select {
	case e.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin skips a part the checkpoint covers (first, skip); the first part
// of any other transaction may commit the open Kafka transaction first.
func (e *exactlyOnce) begin(ctx context.Context, tx *decode.Tx) (skip bool, err error) {
	if !tx.First {
		if e.skipping != nil {
			e.skip(tx)
			return true, nil
		}
		return false, nil
	}
	if skip, err = e.first(ctx, tx); err != nil {
		return false, err
	}
	if skip {
		e.skip(tx)
	}
	return skip, nil
}

// first handles the first part of a transaction: skipped if the
// checkpoint covers it; otherwise the open Kafka transaction is committed
// first when due.
func (e *exactlyOnce) first(ctx context.Context, tx *decode.Tx) (skip bool, err error) {
	s := e.s
	// N.B. a transaction comes only from a stream that holds the slot.
	if err := e.init(ctx); err != nil {
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
		e.skipping = s.tracker.Begin(tx.CommitLSN)
		e.skipped++
		return true, nil
	}
	if e.skipped > 0 {
		s.log.Info("exactly-once: skipped the transactions the checkpoint covers", zap.Int("transactions", e.skipped))
		e.skipped = 0
	}
	if e.open && e.due() {
		if err := e.commit(ctx); err != nil {
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

// skip ends a skipped part: a skipped transaction is confirmed as done.
func (e *exactlyOnce) skip(tx *decode.Tx) {
	s := e.s
	if tx.Last {
		if tx.EndLSN > e.checkpoint {
			// Cannot happen (see first); said loudly if it does.
			s.log.Error("exactly-once: skipped a transaction ending past the checkpoint", zap.Stringer("end_lsn", tx.EndLSN), zap.Stringer("checkpoint", e.checkpoint))
		}
		e.skipping.Close(tx.EndLSN)
		e.skipping = nil
		s.metrics.Skipped()
	}
}

// join opens the Kafka transaction if none is, and makes the current
// PostgreSQL transaction (x, in the tracker) one of it, before its first
// record is produced; the part has n records.
func (e *exactlyOnce) join(x *checkpoint.Tx, n int) error {
	s := e.s
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
		x.Add(1)
		e.txs = append(e.txs, x)
		e.joined = true
	}
	e.records += n
	e.curRecs.Add(int64(n))
	return nil
}

// last ends the current PostgreSQL transaction, committing the Kafka
// transaction when it is due.
func (e *exactlyOnce) last(ctx context.Context, tx *decode.Tx) error {
	s := e.s
	e.inPG.Store(false)
	if !e.open {
		return nil
	}
	e.lastEnd, e.lastCom = tx.EndLSN, tx.CommitLSN
	s.metrics.Checkpoint(uint64(e.checkpoint), uint64(e.lastEnd))
	if e.due() {
		return e.commit(ctx)
	}
	return nil
}

// flush commits the open Kafka transaction, unless a PostgreSQL
// transaction is half handed over.
func (e *exactlyOnce) flush(ctx context.Context) error {
	if err := e.lockCtx(ctx); err != nil {
		return fmt.Errorf("flush: waiting for a kafka transaction's commit in flight: %w", err)
	}
	defer e.unlock()
	if e.inPG.Load() {
		return errors.New("flush: a transaction is half handed over; it is not committed")
	}
	return e.commit(ctx)
}

// haltsOnRejected: a record Kafka rejected on its own halts, its Kafka
// transaction fit only to be aborted (produceIsolated).
func (e *exactlyOnce) haltsOnRejected() string { return "--exactly-once halts on it" }

// due reports whether the open Kafka transaction should be committed.
func (e *exactlyOnce) due() bool {
	s := e.s
	return e.open && (e.records >= s.cfg.TransactionMaxRecords || time.Since(time.Unix(0, e.began.Load())) >= s.cfg.CommitInterval)
}

// fenced wraps ErrFenced around an error that says a newer producer took
// the transactional id.
func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// close aborts the open Kafka transaction, if any, when the sink is
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
func (e *exactlyOnce) close() {
	s := e.s
	e.lock()
	defer e.unlock()
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
