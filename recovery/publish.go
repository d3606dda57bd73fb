package recovery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/pgcatalog"
	"github.com/walrelay/walrelay/sink"
)

// Header is the header every recovered record carries, its value the Kind.
const Header = "walrelay.recovered"

// publish reads the selected rows in snapshot and produces them through
// the decoder and the sink, then waits until Kafka acknowledged every one.
//
// N.B. at-least-once even when the relay runs exactly-once: a recovered
// row has no slot position for a Kafka transaction's checkpoint, and its
// consumers dedupe by id anyway (duplicates are allowed, gaps are not).
func publish(ctx context.Context, cfg Config, kind Kind, snapshot string, sel pgcatalog.RowSelection, acc *Account, log *zap.Logger) error {
	r, err := pgcatalog.OpenSnapshot(ctx, cfg.Replication.ConnString, snapshot)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	dc := cfg.Decode
	dc.ResolvePartitionRoots = false
	dec, err := decode.New(dc, log)
	if err != nil {
		return err
	}
	sc := cfg.Sink
	sc.ExactlyOnce = false
	tr := checkpoint.New(0)
	snk, err := sink.New(sc, sink.Deps{Tracker: tr}, log)
	if err != nil {
		return err
	}
	defer snk.Close()
	if err := snk.Start(ctx); err != nil {
		return err
	}
	hdr := decode.Header{Key: Header, Value: []byte(kind)}
	var f frames
	var lsn pglogrepl.LSN
	feed := func(msg []byte) (*decode.Tx, error) {
		tx, err := dec.Decode(msg)
		if err != nil {
			return nil, fmt.Errorf("decode recovered row: %w", err)
		}
		return tx, nil
	}
	for _, table := range cfg.Replication.Tables {
		rel, err := r.Relation(ctx, table, sel.Column)
		if err != nil {
			return err
		}
		if _, err := feed(f.relation(rel)); err != nil {
			return err
		}
		ta := TableAccount{Table: table}
		n, err := r.Rows(ctx, table, rel, sel, func(vals [][]byte, at time.Time) error {
			lsn++
			when := at
			if when.IsZero() {
				when = time.Now()
			}
			ta.first, ta.last = minTime(ta.first, at), maxTime(ta.last, at)
			// N.B. one message at a time: each reuses the frames' buffer.
			if _, err := feed(f.begin(lsn, when, uint32(lsn))); err != nil {
				return err
			}
			if _, err := feed(f.insert(rel.ID, vals)); err != nil {
				return err
			}
			tx, err := feed(f.commit(lsn, when))
			if err != nil {
				return err
			}
			for i := range tx.Events {
				ev := &tx.Events[i]
				if ev.Err != nil {
					ta.Poison++
					continue
				}
				ev.Headers = append(ev.Headers, hdr)
				ta.Published++
			}
			return snk.Produce(ctx, tx)
		})
		ta.Read = n
		if err != nil {
			return fmt.Errorf("recover rows of %s: %w", table, err)
		}
		if ta.Deletes, ta.DeletesSince, err = r.Deletes(ctx, table); err != nil {
			return err
		}
		ta.First, ta.Last = ta.first, ta.last
		acc.Tables = append(acc.Tables, ta)
		log.Info("read outbox rows in the slot's snapshot", zap.String("table", table), zap.Int("records", n))
	}
	// N.B. Flush returns once every produced record is acknowledged, or
	// with the first failure: nothing is called recovered before.
	if err := snk.Flush(ctx); err != nil {
		return fmt.Errorf("wait for kafka's acknowledgements: %w", err)
	}
	if w := tr.Watermark(); w < lsn {
		return fmt.Errorf("wait for kafka's acknowledgements: %d of %d recovered rows acknowledged", w, lsn)
	}
	if dc.Messages {
		acc.NotRecovered = append(acc.NotRecovered, "events written with pg_logical_emit_message are in the WAL alone: those committed after the slot's last confirmed position cannot be recovered")
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
