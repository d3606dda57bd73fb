package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// errStopped: the partition was revoked while its record waited for a
// retry; the record is left to the partition's next owner.
var errStopped = errors.New("partition revoked")

// errHandlerTimeout marks a Handler that ran past Config.HandlerTimeout.
var errHandlerTimeout = errors.New("handler timeout")

// handle applies one record, retrying until it is committed, skipped as a
// duplicate or dead-lettered; it returns an error only when ctx ends or
// stop is closed first (nothing of the record committed, or its outcome
// unknown). stop ends a retry's wait, not an attempt in flight.
//
// N.B. a dead-lettered id is not marked processed: its effect was not
// applied, so a replay of the dead letter (Redrive) must apply it. The
// price: a redelivery of the original (a crash before the offset commit, a
// rewound group) tries it again and may dead-letter it a second time; two
// dead letters of one id still apply once, the second replay being a
// duplicate.
func (c *Consumer) handle(ctx context.Context, stop <-chan struct{}, r *kgo.Record) error {
	id := header(r, c.cfg.IDHeader)
	if err := checkID(id); err != nil {
		// N.B. without an id (or one the table cannot hold) the record
		// cannot be deduplicated: it is parked, never applied and never
		// silently skipped.
		return c.deadLetter(ctx, stop, r, idClass(err), err, 0)
	}
	b := backoff{next: c.cfg.RetryBackoff, max: c.cfg.MaxRetryBackoff}
	attempts := 0
	for {
		herr, err := c.attempt(ctx, r, id)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case !herr && errors.Is(err, errInvalidID):
			return c.deadLetter(ctx, stop, r, ClassInvalidID, err, 0)
		case herr && IsPermanent(err) && c.cfg.OnFailure != Halt:
			return c.failed(ctx, stop, r, ClassPermanent, err, attempts+1)
		case herr && (errors.Is(err, errHandlerTimeout) || !transient(err)):
			// N.B. a Handler past its timeout counts as an attempt:
			// pgx's own timeout error would read as the database's.
			attempts++
			if attempts >= c.cfg.MaxAttempts && c.cfg.OnFailure != Halt {
				return c.failed(ctx, stop, r, ClassHandler, err, attempts)
			}
			if attempts == 1 {
				c.log.Warn("handler failed, retrying", zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
					zap.Int64("offset", r.Offset), zap.ByteString("id", id), zap.Error(err))
			}
			if attempts == c.cfg.MaxAttempts { // OnFailure Halt
				c.log.Error("partition halted (OnFailure halt): the record is retried until it succeeds", zap.String("topic", r.Topic),
					zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.ByteString("id", id), zap.Error(err))
			}
		default:
			// N.B. the database went away (or aborted the transaction to
			// resolve a conflict): not the record's fault, so it does not
			// count as an attempt and is retried until the database is
			// back.
			c.log.Warn("database unavailable, retrying", zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
				zap.Int64("offset", r.Offset), zap.Error(err))
		}
		c.retries.Add(1)
		if err := b.waitOr(ctx, stop); err != nil {
			return err
		}
	}
}

// failed is the end of a record that failed for good: dead-lettered, or
// held (OnFailure HoldKey).
func (c *Consumer) failed(ctx context.Context, stop <-chan struct{}, r *kgo.Record, class string, cause error, attempts int) error {
	if c.cfg.OnFailure == HoldKey {
		return &heldError{cause}
	}
	return c.deadLetter(ctx, stop, r, class, cause, attempts)
}

// attempt runs one transaction for r: the id insert and, if the id is new,
// the Handler (otherwise OnDuplicate). handlerErr says whether err came
// from the Handler.
func (c *Consumer) attempt(ctx context.Context, r *kgo.Record, id []byte) (handlerErr bool, err error) {
	defer c.observe(time.Now())
	ctx, span := c.startSpan(ctx, r, id) // trace.go
	defer func() { span.end(err) }()
	// N.B. the id goes in first, in the effect's transaction: a concurrent
	// or earlier transaction with the same id makes this insert wait for
	// it and then affect no row, so the effect is applied at most once.
	// BEGIN and the insert share one round trip (begin.go).
	tx, br := c.beginWith(ctx, c.insert, c.cfg.Group, id)
	defer tx.Rollback(context.Background()) // a no-op after Commit
	defer br.Close()                        // closed below; a no-op then
	if _, err := br.Exec(); err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	tag, err := br.Exec()
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		return false, rejectedID(fmt.Errorf("insert id into %s: %w", c.cfg.Table, err))
	}
	dup := tag.RowsAffected() == 0
	span.duplicate(dup)
	hctx, cancel := context.WithTimeout(ctx, c.cfg.HandlerTimeout)
	defer cancel()
	switch {
	case !dup:
		err = c.cfg.Handler(hctx, tx, r)
	case c.cfg.OnDuplicate != nil:
		err = c.cfg.OnDuplicate(hctx, tx, r)
	}
	if err != nil && errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return true, fmt.Errorf("%w: no result within %s: %w", errHandlerTimeout, c.cfg.HandlerTimeout, err)
	}
	if err != nil {
		// N.B. a connection lost under the Handler is the database's
		// outage, not the record's fault: not counted as an attempt.
		return !tx.Conn().IsClosed(), err
	}
	if err := tx.Commit(ctx); err != nil {
		// N.B. a commit whose answer was lost may have committed: the
		// retry's insert then finds the id and skips the Handler.
		return false, fmt.Errorf("commit: %w", err)
	}
	if dup {
		c.duplicates.Add(1)
	} else {
		c.applied.Add(1)
	}
	return false, nil
}

var errMissingID = errors.New("record has no id header: it cannot be deduplicated")

// transient reports whether err means the database was unavailable or
// aborted the transaction for a conflict, rather than the Handler failing
// on the record. Classified by SQLSTATE and pgconn's own predicates.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code[:2] == "08", pgErr.Code[:2] == "53": // connection exception, insufficient resources
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now
			return true
		case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) && !errors.Is(err, context.Canceled) || errors.Is(err, pgx.ErrTxClosed)
}

func header(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// backoff doubles a wait up to max.
type backoff struct{ next, max time.Duration }

func (b *backoff) wait(ctx context.Context) error { return b.waitOr(ctx, nil) }

// waitOr waits unless ctx ends (its error) or stop is closed (errStopped).
func (b *backoff) waitOr(ctx context.Context, stop <-chan struct{}) error {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	case <-t.C:
		return nil
	}
}
