package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// BatchHandler applies the effects of several records of one partition,
// in offset order, inside tx, the one transaction that also records their
// ids: a bulk projection (one multi-row statement, COPY) instead of a
// transaction per record. rs holds only records whose id is not processed
// yet (duplicates, redelivered ones and repeats within the batch, are
// filtered out before; OnDuplicate runs for them in tx). The rules of
// Handler hold: all database work through tx, no commit or rollback of
// tx, ctx ends after Config.HandlerTimeout (for the whole batch). rs keeps
// each key's records in offset order; apply them in that order.
//
// A returned error rolls the batch back, and its records are handled one
// by one (each with Handler if set, else with BatchHandler on a
// one-record slice): the bad record is retried, dead-lettered or held
// alone (Config.OnFailure) and the others are applied.
type BatchHandler func(ctx context.Context, tx pgx.Tx, rs []*kgo.Record) error

// one is b as a Handler: a batch of one record.
func (b BatchHandler) one() Handler {
	return func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error { return b(ctx, tx, []*kgo.Record{r}) }
}

// attemptBatch runs one transaction for rs (records with an id, in offset
// order): the ids inserted at once, BatchHandler on the records whose id
// was new, OnDuplicate on the others, commit.
func (c *Consumer) attemptBatch(ctx context.Context, rs []*kgo.Record) error {
	defer c.observe(time.Now())
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = string(header(r, c.cfg.IDHeader))
	}
	// N.B. the ids go in first, in the effects' transaction, as one
	// record's does (attempt): RETURNING names those that were new; an id
	// twice in the batch is new once, its first record's. BEGIN and the
	// insert share one round trip (begin.go).
	tx, br := c.beginWith(ctx, c.insertBatch, c.cfg.Group, ids)
	defer tx.Rollback(context.Background()) // a no-op after Commit
	defer br.Close()                        // closed below; a no-op then
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("insert ids into %s: %w", c.cfg.Table, err)
	}
	fresh := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("insert ids into %s: %w", c.cfg.Table, err)
		}
		fresh[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert ids into %s: %w", c.cfg.Table, err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("insert ids into %s: %w", c.cfg.Table, err)
	}
	apply := make([]*kgo.Record, 0, len(rs))
	var dups []*kgo.Record
	for i, r := range rs {
		if fresh[ids[i]] {
			delete(fresh, ids[i])
			apply = append(apply, r)
		} else {
			dups = append(dups, r)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, c.cfg.HandlerTimeout)
	defer cancel()
	if len(apply) > 0 {
		err = c.cfg.BatchHandler(hctx, tx, apply)
	}
	for _, r := range dups {
		if err != nil || c.cfg.OnDuplicate == nil {
			break
		}
		err = c.cfg.OnDuplicate(hctx, tx, r)
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	c.applied.Add(int64(len(apply)))
	c.duplicates.Add(int64(len(dups)))
	return nil
}

// batch handles the records taken with r (r first, in offset order) as one
// transaction, and one by one if it fails. Records of a held key join
// their key's hold; records without a valid id are dead-lettered alone. It
// returns false when the worker stops.
func (w *partition) batch(h *holds, rs []*kgo.Record) bool {
	var in, alone []*kgo.Record
	for _, r := range rs {
		switch {
		case h.has(r.Key):
			// N.B. not in the batch: a held key's records wait behind
			// its failed one, in order.
			alone = append(alone, r)
		case checkID(header(r, w.c.cfg.IDHeader)) != nil:
			// N.B. dead-lettered alone: an id the table cannot hold
			// would fail the batch's insert.
			alone = append(alone, r)
		default:
			in = append(in, r)
		}
	}
	if len(in) > 0 {
		err := w.c.attemptBatch(w.ctx, in)
		if w.ctx.Err() != nil {
			return false
		}
		if err != nil {
			// N.B. no retry of the whole batch: each record is tried on
			// its own, so that the bad one fails alone and the others
			// are applied (a database outage is retried per record).
			w.c.retries.Add(1)
			w.c.log.Info("batch failed, handling its records one by one", zap.String("topic", w.topic),
				zap.Int32("partition", w.p), zap.Int64("offset", in[0].Offset), zap.Int("records", len(in)), zap.Error(err))
			alone = rs
		}
	}
	for _, r := range alone {
		if !w.one(h, r) {
			return false
		}
	}
	w.position(h, rs[len(rs)-1])
	return true
}

// one handles r on its own (held behind its key, or tried, dead-lettered
// or held); false when the worker stops.
func (w *partition) one(h *holds, r *kgo.Record) bool {
	if h.has(r.Key) {
		// N.B. behind its key's held record, in order.
		h.add(r)
		return true
	}
	err := w.c.handle(w.ctx, w.stop, r)
	var he *heldError
	switch {
	case errors.As(err, &he):
		w.hold(h, r, he.cause)
	case err != nil:
		return false // stopped: r's outcome is left to the next owner
	}
	return true
}
