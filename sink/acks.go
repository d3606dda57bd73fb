package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/checkpoint"
)

// txAcks is the promise of one Tx part's records in one handoff.
type txAcks struct {
	s    *Sink
	x    *checkpoint.Tx
	meta recordMeta
	h    *handoff
	// handed: when its first record was handed to the client (the records
	// after a wait for room get txAcks of their own).
	handed time.Time
}

func (a *txAcks) done(r *kgo.Record, err error) {
	if t := a.s.deps.Tracer; t != nil {
		t.Acked(r, err) // trace.go
	}
	a.s.budget.Release(recordCost(r))
	a.h.pending.Add(-1)
	if err != nil {
		if !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
			a.s.metrics.Failure() // not the records a discarded client gives back
		}
		_, own := a.s.eventStamped.Load(r.Topic)
		if retry := a.s.timestampRetry(r, err, own); retry != nil {
			// N.B. no isolation: the records are not at fault.
			a.s.fail(retry)
			return
		}
		if rejected(err) {
			// N.B. the broker's error is the batch's, and franz-go fails
			// every buffered record of the partition with it: which record
			// is at fault is unknown, so none is dead-lettered here. The
			// relay restarts from the confirmed position and the next sink
			// produces this topic's records one at a time up to the newest
			// transaction begun so far, which holds every record buffered
			// now.
			a.s.iso.add(r.Topic, pglogrepl.LSN(a.s.lastCommit.Load()))
			err = fmt.Errorf("%w: %w", ErrBatchRejected, err)
		}
		// N.B. no Ack: the watermark stays below this transaction, and the
		// relay restarts from it.
		a.s.fail(fmt.Errorf("produce to topic %s partition %d: %w", r.Topic, r.Partition, fenced(err)))
		return
	}
	a.s.metrics.Published(r.Topic, a.meta.commitTime, a.handed)
	a.x.Ack()
}

// deadLettered acknowledges an event once its dead-letter record is written.
func (a *txAcks) deadLettered(r *kgo.Record, err error) {
	a.s.budget.Release(recordCost(r))
	a.h.pending.Add(-1)
	if err != nil {
		// N.B. an event that cannot be parked is never dropped: halt.
		a.s.metrics.Failure()
		a.s.fail(fmt.Errorf("%w: dead-letter produce to %s failed: %w", ErrPoison, r.Topic, err))
		return
	}
	a.x.Ack()
}
