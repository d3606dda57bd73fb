package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// Consumer is one member of a consumer group applying records through an
// inbox table.
type Consumer struct {
	cfg Config
	log *zap.Logger
	// opts are the group client's options, adminOpts the brokers and
	// Config.KafkaOpts alone (Run's checks before it joins the group).
	opts, adminOpts []kgo.Opt
	// newClient is kgo.NewClient; a test may wrap it.
	newClient func(...kgo.Opt) (*kgo.Client, error)
	// cl is the group client, from Run on. N.B. kgo calls the group
	// callbacks (group.go) from the client's own goroutines, maybe before
	// Run has stored cl: they use the client they are given.
	cl          *kgo.Client
	insert      string // the id insert, built once
	insertBatch string // BatchHandler's: several ids, the new ones returned

	// base is the parent of the partition workers' contexts: it ends with
	// Run.
	base       context.Context
	cancelBase context.CancelFunc

	mu    sync.Mutex // guards parts: the group callbacks and the poll loop
	parts map[tp]*partition
	// commitMu orders offset commits: the committer's and a revocation's.
	commitMu sync.Mutex

	applied, duplicates, deadLettered, retries, commitErrors atomic.Int64
	handlerSeconds                                           prometheus.Histogram
}

// tp names a partition.
type tp struct {
	topic string
	p     int32
}

// Stats are a Consumer's counters since New.
type Stats struct {
	Applied      int64 // records whose Handler committed
	Duplicates   int64 // records whose id was processed already (delivered again): Handler skipped
	DeadLettered int64 // records produced to the dead-letter topic
	Retries      int64 // attempts that failed and were tried again
	CommitErrors int64 // offset commits that failed (the records come again; the table absorbs them)
}

// New checks cfg and the Kafka client's options; it connects to nothing.
// log is a *zap.Logger for the Consumer's lines, or nil: Config.Logger
// takes any logger (log/slog's too); give one or the other. Run joins the
// group and consumes.
func New(cfg Config, log *zap.Logger) (*Consumer, error) {
	cfg.setDefaults()
	err := cfg.Validate()
	if cfg.Logger != nil && log != nil {
		err = errors.Join(err, errors.New("logger: both Config.Logger and New's *zap.Logger given (give one)"))
	}
	if err != nil {
		return nil, fmt.Errorf("inbox config: %w", err)
	}
	c := &Consumer{cfg: cfg, log: consumerLog(cfg.Logger, log), parts: map[tp]*partition{}, handlerSeconds: newHandlerSeconds(cfg.Group),
		newClient: kgo.NewClient}
	c.base, c.cancelBase = context.WithCancel(context.Background())
	ident, _ := tableIdent(cfg.Table)
	c.insert = `INSERT INTO ` + ident + ` (consumer, id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	c.insertBatch = `INSERT INTO ` + ident + ` (consumer, id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING RETURNING id`
	if c.cfg.Handler == nil {
		c.cfg.Handler = c.cfg.BatchHandler.one()
	}
	// N.B. New only checks the client options: the client, and with it
	// the group membership, begins in Run (a Consumer never run holds no
	// partitions).
	adminOpts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.KafkaOpts...)
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
		// N.B. a partition resumed after its queue drained (partition.go)
		// is fetched once the broker's fetch in flight returns: at most
		// this long (kgo's default 5 s) when the others are caught up.
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, cfg.KafkaOpts...)
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		// N.B. offsets are committed by the committer only, after the
		// database commits of the records they cover; autocommit would
		// commit polled offsets whose transactions may still roll back.
		kgo.DisableAutoCommit(),
		// N.B. no rebalance while the poll loop hands a poll's records to
		// the partition workers: a revocation (onRevoked) then finds every
		// record of its partitions queued in a worker it stops, and
		// commits what they finished before the partitions move.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)
	if cfg.InstanceID != DynamicMembership {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	if cfg.TopicsRegex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	if err := kgo.ValidateOpts(opts...); err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	c.opts, c.adminOpts = opts, adminOpts
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
// finished, closes the client (a dynamic member leaves the group; a static
// one only with Config.LeaveGroupOnStop) and returns ctx.Err(). It returns
// another error at start (the inbox table is missing or not writable, the
// dead-letter topic cannot be had, the instance id is in use in this
// process) and when another member joined with this one's instance id
// (fenced). Call it once.
func (c *Consumer) Run(ctx context.Context) (err error) {
	defer func() {
		c.cancelBase()
		if c.cl != nil {
			c.cl.Close()
		}
		s := c.Stats()
		c.log.Info("stopped", zap.Int64("applied", s.Applied), zap.Int64("duplicates", s.Duplicates),
			zap.Int64("dead_lettered", s.DeadLettered), zap.Int64("retries", s.Retries))
	}()
	if err := claimInstance(c.cfg.Group, c.cfg.InstanceID); err != nil {
		return err
	}
	defer releaseInstance(c.cfg.Group, c.cfg.InstanceID)
	if err := c.checkTable(ctx); err != nil {
		return err
	}
	if err := c.ensureTopic(ctx, c.cfg.DeadLetterTopic); err != nil {
		return err
	}
	c.log.Info("consuming", zap.String("group", c.cfg.Group), zap.Strings("topics", c.cfg.Topics),
		zap.String("instance_id", c.cfg.InstanceID), zap.String("dead_letter_topic", c.cfg.DeadLetterTopic),
		zap.String("table", c.cfg.Table))
	cl, err := c.newClient(c.opts...)
	if err != nil {
		return fmt.Errorf("create kafka client: %w", err)
	}
	c.cl = cl
	cctx, stopCommitter := context.WithCancel(ctx)
	committed := make(chan struct{})
	go c.commitLoop(cctx, committed)
	defer func() {
		stopCommitter()
		<-committed
		// N.B. the workers stop (a transaction in flight rolls back),
		// then what they finished is committed, so a restart does not
		// see it again.
		ws := c.detach(nil)
		for _, w := range ws {
			w.halt(true)
		}
		c.commitMu.Lock()
		c.commitFinished(c.cl, ws)
		c.commitMu.Unlock()
		if c.cfg.LeaveGroupOnStop && c.cfg.InstanceID != DynamicMembership && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			c.leaveGroup()
		}
	}()
	for {
		fs := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			c.cl.AllowRebalance()
			return ctx.Err()
		}
		var fenced error
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, kerr.FencedInstanceID) {
				fenced = err
			}
			// N.B. kgo retries fetch errors itself; they are reported,
			// not acted on.
			c.log.Warn("fetch", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		c.dispatch(fs)
		c.cl.AllowRebalance()
		if fenced != nil {
			// N.B. another process joined with this instance id: two
			// members cannot share it, the newer one wins.
			return fmt.Errorf("consume: fenced: another member of group %s joined with instance id %q (give each process its own Config.InstanceID): %w",
				c.cfg.Group, c.cfg.InstanceID, fenced)
		}
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

// dispatch queues each partition's records in its worker, without
// waiting for any: a partition whose worker is busy pauses itself.
func (c *Consumer) dispatch(fs kgo.Fetches) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		w := c.parts[tp{p.Topic, p.Partition}]
		if w == nil {
			// N.B. not assigned to this member (cannot happen with
			// BlockRebalanceOnPoll): its owner handles the records.
			c.log.Warn("records of a partition not assigned here, left to its owner", zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
			return
		}
		w.push(p.Records, p.HighWatermark)
	})
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
	cl, err := kgo.NewClient(c.adminOpts...)
	if err != nil {
		return fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
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
	_, err = kafkaconn.CreateTopics(ctx, cl, c.log, 0, kafkaconn.Topic{Name: topic, Partitions: -1, ReplicationFactor: -1})
	if ce := (*kafkaconn.CreateError)(nil); errors.As(err, &ce) {
		return fmt.Errorf("create dead-letter topic %s (create it, or grant CREATE on it): %w", topic, ce.Err)
	}
	c.log.Info("created dead-letter topic", zap.String("topic", topic))
	return nil
}
