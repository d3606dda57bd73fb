package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// Consumer is one member of a consumer group applying records through an
// inbox table.
type Consumer struct {
	cfg    Config
	log    *zap.Logger
	cl     *kgo.Client
	insert string // the id insert, built once

	applied, duplicates, deadLettered, retries, commitErrors atomic.Int64
}

// Stats are a Consumer's counters since New.
type Stats struct {
	Applied      int64 // records whose Handler committed
	Duplicates   int64 // records whose id was processed already (delivered again): Handler skipped
	DeadLettered int64 // records produced to the dead-letter topic
	Retries      int64 // attempts that failed and were tried again
	CommitErrors int64 // offset commits that failed (the records come again; the table absorbs them)
}

// New checks cfg and builds the Kafka client; log may be nil. Run starts
// consuming.
func New(cfg Config, log *zap.Logger) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("inbox config: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Consumer{cfg: cfg, log: log.Named("inbox")}
	ident, _ := tableIdent(cfg.Table)
	c.insert = `INSERT INTO ` + ident + ` (consumer, id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		// N.B. a new group starts at the beginning of the topics: an
		// inbox consumer that starts after walrelay must still see every
		// event. Committed offsets take precedence.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// N.B. read_committed: with walrelay --exactly-once, records of
		// aborted Kafka transactions are never handed to the Handler.
		// Records of a non-transactional producer are unaffected.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}, cfg.KafkaOpts...)
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		// N.B. offsets are committed by Run only, after the database
		// commits of the records they cover; autocommit would commit
		// polled offsets whose transactions may still roll back.
		kgo.DisableAutoCommit(),
		// N.B. no rebalance while a poll's records are being handled:
		// Run commits the offsets of what it finished, then allows the
		// rebalance, so a partition is never revoked (and handed to
		// another member) with a transaction in flight or a finished one
		// whose offset is not committed.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.log.Info("partitions assigned", zap.Any("partitions", m))
		}),
		// N.B. with BlockRebalanceOnPoll these run only between polls,
		// when every finished record's offset is committed and nothing is
		// in flight: there is nothing left to commit or abort.
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.log.Info("partitions revoked", zap.Any("partitions", m))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.log.Warn("partitions lost (the group went on without this member)", zap.Any("partitions", m))
		}),
	)
	if cfg.TopicsRegex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	c.cl = cl
	return c, nil
}

// Stats returns the counters so far.
func (c *Consumer) Stats() Stats {
	return Stats{
		Applied: c.applied.Load(), Duplicates: c.duplicates.Load(), DeadLettered: c.deadLettered.Load(),
		Retries: c.retries.Load(), CommitErrors: c.commitErrors.Load(),
	}
}

// Run consumes until ctx ends, then commits the offsets of the records it
// finished, leaves the group, closes the client and returns ctx.Err(). It
// returns another error only at start: the inbox table is missing or not
// writable, or the dead-letter topic cannot be had. Call it once.
func (c *Consumer) Run(ctx context.Context) error {
	defer func() {
		c.cl.Close() // leaves the group
		s := c.Stats()
		c.log.Info("stopped", zap.Int64("applied", s.Applied), zap.Int64("duplicates", s.Duplicates),
			zap.Int64("dead_lettered", s.DeadLettered), zap.Int64("retries", s.Retries))
	}()
	if err := c.checkTable(ctx); err != nil {
		return err
	}
	if err := c.ensureTopic(ctx, c.cfg.DeadLetterTopic); err != nil {
		return err
	}
	c.log.Info("consuming", zap.String("group", c.cfg.Group), zap.Strings("topics", c.cfg.Topics),
		zap.String("dead_letter_topic", c.cfg.DeadLetterTopic), zap.String("table", c.cfg.Table))
	for {
		fs := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			c.cl.AllowRebalance()
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			// N.B. kgo retries fetch errors itself; they are reported,
			// not acted on.
			c.log.Warn("fetch", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		done := c.handleFetches(ctx, fs)
		c.commit(done)
		c.cl.AllowRebalance()
		if fs.NumRecords() == 0 && len(fs.Errors()) > 0 {
			// N.B. a poll of errors only returns at once: wait a little
			// rather than spin on an error that persists.
			b := backoff{next: c.cfg.MaxRetryBackoff / 5}
			if b.wait(ctx) != nil {
				return ctx.Err()
			}
		}
	}
}

// handleFetches handles the polled records, partitions concurrently, each
// partition's records in order, and returns for each partition the last
// record finished before the first that was not (ctx ended).
func (c *Consumer) handleFetches(ctx context.Context, fs kgo.Fetches) []*kgo.Record {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done []*kgo.Record
	)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		wg.Add(1)
		go func(recs []*kgo.Record) {
			defer wg.Done()
			var last *kgo.Record
			for _, r := range recs {
				// N.B. sequential within a partition: the next record is
				// begun only after this one's transaction committed, so
				// effects keep the partition's (the aggregate's) order.
				if c.handle(ctx, r) != nil {
					break
				}
				last = r
			}
			if last != nil {
				mu.Lock()
				done = append(done, last)
				mu.Unlock()
			}
		}(p.Records)
	})
	wg.Wait()
	return done
}

// commit commits the offsets after the given records.
func (c *Consumer) commit(done []*kgo.Record) {
	if len(done) == 0 {
		return
	}
	// N.B. a context of its own: at shutdown (ctx ended) the records
	// finished so far are still committed, so a restart does not see them
	// again. The offset is the record's offset + 1 with its leader epoch.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.cl.CommitRecords(cctx, done...); err != nil {
		// N.B. not fatal: the records are delivered again (to this member
		// or the partition's new owner) and the inbox table skips them.
		c.commitErrors.Add(1)
		c.log.Warn("commit offsets (the records will be delivered again and skipped as duplicates)", zap.Error(err))
	}
}

// handle applies one record, retrying until it is committed, skipped as a
// duplicate or dead-lettered; it returns an error only when ctx ends first
// (nothing of the record committed, or its outcome unknown).
//
// N.B. a dead-lettered id is not marked processed: its effect was not
// applied, so a replay of the dead letter (Redrive) must apply it. The
// price: a redelivery of the original (a crash before the offset commit, a
// rewound group) tries it again and may dead-letter it a second time; two
// dead letters of one id still apply once, the second replay being a
// duplicate.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) error {
	id := header(r, c.cfg.IDHeader)
	if len(id) == 0 {
		// N.B. without an id the record cannot be deduplicated: it is
		// parked, never applied and never silently skipped.
		return c.deadLetter(ctx, r, ClassMissingID, errMissingID, 0)
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
		case herr && IsPermanent(err):
			return c.deadLetter(ctx, r, ClassPermanent, err, attempts+1)
		case herr && !transient(err):
			attempts++
			if attempts >= c.cfg.MaxAttempts {
				return c.deadLetter(ctx, r, ClassHandler, err, attempts)
			}
			if attempts == 1 {
				c.log.Warn("handler failed, retrying", zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
					zap.Int64("offset", r.Offset), zap.ByteString("id", id), zap.Error(err))
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
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
}

// attempt runs one transaction for r: the id insert and, if the id is new,
// the Handler (otherwise OnDuplicate). handlerErr says whether err came
// from the Handler.
func (c *Consumer) attempt(ctx context.Context, r *kgo.Record, id []byte) (handlerErr bool, err error) {
	tx, err := c.cfg.Pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background()) // a no-op after Commit
	// N.B. the id goes in first, in the effect's transaction: a concurrent
	// or earlier transaction with the same id makes this insert wait for
	// it and then affect no row, so the effect is applied at most once.
	tag, err := tx.Exec(ctx, c.insert, c.cfg.Group, id)
	if err != nil {
		return false, fmt.Errorf("insert id into %s: %w", c.cfg.Table, err)
	}
	dup := tag.RowsAffected() == 0
	switch {
	case !dup:
		err = c.cfg.Handler(ctx, tx, r)
	case c.cfg.OnDuplicate != nil:
		err = c.cfg.OnDuplicate(ctx, tx, r)
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

// checkTable fails when the inbox table cannot be written, so that a
// missing table stops Run at once instead of being retried per record.
func (c *Consumer) checkTable(ctx context.Context) error {
	ident, _ := tableIdent(c.cfg.Table)
	var ok bool
	err := c.cfg.Pool.QueryRow(ctx, `SELECT has_table_privilege($1, 'INSERT')`, ident).Scan(&ok)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"): // undefined_table, invalid_schema_name
		return fmt.Errorf("check inbox table: %s does not exist (create it with inbox.CreateTable or the SQL of inbox.DDL): %w", c.cfg.Table, err)
	case err != nil:
		return fmt.Errorf("check inbox table %s: %w", c.cfg.Table, err)
	case !ok:
		return fmt.Errorf("check inbox table: this role may not insert into %s (GRANT INSERT, SELECT ON it)", c.cfg.Table)
	}
	return nil
}

// ensureTopic creates topic if it does not exist.
func (c *Consumer) ensureTopic(ctx context.Context, topic string) error {
	adm := kadm.NewClient(c.cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("list dead-letter topic %s: %w", topic, err)
	}
	if details.Has(topic) && details[topic].Err == nil {
		return nil
	}
	// N.B. no leader wait (0), as before: a dead letter is produced only
	// when a record fails for good, and the client retries a partition
	// whose leader is not ready yet.
	_, err = kafkaconn.CreateTopics(ctx, c.cl, c.log, 0, kafkaconn.Topic{Name: topic, Partitions: -1, ReplicationFactor: -1})
	if ce := (*kafkaconn.CreateError)(nil); errors.As(err, &ce) {
		return fmt.Errorf("create dead-letter topic %s (create it, or grant CREATE on it): %w", topic, ce.Err)
	}
	c.log.Info("created dead-letter topic", zap.String("topic", topic))
	return nil
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

func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
