package inbox

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// FailurePolicy is what a record that fails for good (Config.MaxAttempts
// failed attempts, or a Permanent error) does to its partition.
type FailurePolicy int

const (
	// DeadLetter produces the record to the dead-letter topic and goes on
	// with the partition (the default). The key's later records are
	// applied without it; Redrive replays it.
	DeadLetter FailurePolicy = iota
	// HoldKey holds the record, and its key's later records of the
	// partition behind it, in order, while the other keys flow; the held
	// record is tried again every MaxRetryBackoff until it succeeds, then
	// the key's held records are applied in order. The partition's offset
	// is not committed past its oldest held record (a restart or the next
	// owner sees them again; the records after it that were applied are
	// duplicates then). A partition holding 2 × MaxPollRecords records
	// takes no more until a key is released (its fetching pauses). The
	// consumer-side counterpart of walrelay's parking: each aggregate's
	// order survives a failure.
	HoldKey
	// Halt stops the partition at the record: it is tried again every
	// MaxRetryBackoff until it succeeds, the other partitions flowing.
	Halt
)

func (p FailurePolicy) String() string {
	switch p {
	case DeadLetter:
		return "dead-letter"
	case HoldKey:
		return "hold-key"
	case Halt:
		return "halt"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// heldError is handle's answer under HoldKey: r failed for good.
type heldError struct{ cause error }

func (e *heldError) Error() string { return "held: " + e.cause.Error() }
func (e *heldError) Unwrap() error { return e.cause }

// holds are a partition worker's held keys, each with its records in
// offset order (the first is the one that failed). Only the worker
// touches them.
type holds struct {
	keys    map[string][]*kgo.Record
	n       int       // records held in all
	retryAt time.Time // when the held records are tried next
}

func (h *holds) has(key []byte) bool { _, ok := h.keys[string(key)]; return ok }

func (h *holds) add(r *kgo.Record) {
	if h.keys == nil {
		h.keys = map[string][]*kgo.Record{}
	}
	h.keys[string(r.Key)] = append(h.keys[string(r.Key)], r)
	h.n++
}

// oldest is the held record of the lowest offset, nil when none.
func (h *holds) oldest() *kgo.Record {
	var o *kgo.Record
	for _, q := range h.keys {
		if o == nil || q[0].Offset < o.Offset {
			o = q[0]
		}
	}
	return o
}

// position records how far the partition may be committed: after last,
// the last record taken, or before the oldest held record.
func (w *partition) position(h *holds, last *kgo.Record) {
	w.held.Store(int64(h.n))
	o := h.oldest()
	if o == nil {
		w.finished.Store(last)
		return
	}
	// N.B. the commit stops before the oldest held record: kgo commits a
	// record's offset + 1, so the record before it, with its epoch.
	w.finished.Store(&kgo.Record{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset - 1, LeaderEpoch: o.LeaderEpoch})
}

// hold starts holding r's key at r.
func (w *partition) hold(h *holds, r *kgo.Record, err error) {
	h.add(r)
	if h.retryAt.IsZero() {
		h.retryAt = time.Now().Add(w.c.cfg.MaxRetryBackoff)
	}
	w.c.log.Warn("key held (OnFailure hold-key): its later records wait behind this one, retried every max retry backoff",
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset),
		zap.ByteString("key", r.Key), zap.ByteString("id", header(r, w.c.cfg.IDHeader)), zap.Error(err))
}

// retryHeld tries each held key's first record once, oldest first; a key
// whose first record succeeds has its later records handled in order
// (one may be held again). It returns an error when the worker stops.
func (w *partition) retryHeld(h *holds) error {
	heads := make([]*kgo.Record, 0, len(h.keys))
	for _, q := range h.keys {
		heads = append(heads, q[0])
	}
	slices.SortFunc(heads, func(a, b *kgo.Record) int { return cmp.Compare(a.Offset, b.Offset) })
	for _, head := range heads {
		if _, err := w.c.attempt(w.ctx, head, header(head, w.c.cfg.IDHeader)); err != nil {
			if w.ctx.Err() != nil {
				return w.ctx.Err()
			}
			w.c.retries.Add(1)
			continue
		}
		k := string(head.Key)
		q := h.keys[k][1:]
		h.n--
		delete(h.keys, k)
		released := 1
		for i, r := range q {
			err := w.c.handle(w.ctx, w.stop, r)
			var he *heldError
			if errors.As(err, &he) {
				h.keys[k] = q[i:]
				break
			}
			h.n--
			if err != nil {
				h.keys[k] = q[i:]
				h.n++
				return err
			}
			released++
		}
		w.c.log.Info("key released", zap.String("topic", head.Topic), zap.Int32("partition", head.Partition),
			zap.ByteString("key", head.Key), zap.Int("records", released))
	}
	h.retryAt = time.Now().Add(w.c.cfg.MaxRetryBackoff)
	if len(h.keys) == 0 {
		h.retryAt = time.Time{}
	}
	return nil
}
