package inbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Handler applies the effect of one record inside tx, the transaction that
// also records the record's id. It must do all its database work through
// tx (work outside it is not undone when the transaction rolls back, and
// is repeated when the record is delivered again) and must not commit or
// roll back tx. A returned error rolls the transaction back; the record is
// tried again (Config.MaxAttempts), then dead-lettered. Wrap the error with
// Permanent to dead-letter at once. ctx ends after Config.HandlerTimeout.
// It runs on the goroutine of the record's partition: the Handlers of
// different partitions run concurrently, those of one partition one after
// the other.
type Handler func(ctx context.Context, tx pgx.Tx, r *kgo.Record) error

// Config configures a Consumer. Zero values mean the defaults named.
type Config struct {
	// Brokers are the Kafka seed brokers, host:port. Required.
	Brokers []string
	// Group is the Kafka consumer group. Required. It also names this
	// consumer's rows in the inbox table (column consumer).
	Group string
	// Topics are the topics to consume (walrelay's are
	// outbox.event.<aggregatetype>). Required. With TopicsRegex each is a
	// regular expression instead.
	Topics      []string
	TopicsRegex bool
	// Pool is the database the Handler writes to and the inbox table is in.
	// Required. Each partition is handled by a goroutine of its own that
	// holds one connection for its transaction: give the pool at least as
	// many connections as partitions this member may own (pgxpool's
	// pool_max_conns, default 4 or the number of CPUs), or partitions
	// wait for one another.
	Pool *pgxpool.Pool
	// Handler applies one record. Required, unless BatchHandler is set.
	Handler Handler
	// BatchHandler, if set, applies the records of one partition that
	// are at hand (queued from its polls, up to MaxBatchRecords) in one
	// transaction with their ids, instead of a transaction per record: for
	// bulk projections. A failed batch is handled record by record, with
	// Handler (or, without one, BatchHandler on one record). Default nil.
	BatchHandler BatchHandler
	// MaxBatchRecords bounds the records of one BatchHandler call.
	// Default MaxPollRecords.
	MaxBatchRecords int

	// Table is the processed-messages table (DDL), optionally
	// schema-qualified. Default DefaultTable ("inbox_processed").
	Table string
	// IDHeader is the header holding the message id. Default "id", the
	// header walrelay (and Debezium's outbox router) puts on every record.
	IDHeader string
	// MaxAttempts is how many times the Handler is tried on one record
	// before it is dead-lettered. Default 5. Database outages (the
	// connection lost, the server shutting down, a serialization failure or
	// deadlock) do not count: they are retried until the database is back.
	MaxAttempts int
	// OnFailure is what a record that fails for good does to its
	// partition: DeadLetter (the default), HoldKey (its key's later
	// records wait behind it, the other keys flow) or Halt (the
	// partition waits). Under HoldKey and Halt the record is tried again
	// every MaxRetryBackoff until it succeeds. A record without an id is
	// dead-lettered whatever the policy.
	OnFailure FailurePolicy
	// RetryBackoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxRetryBackoff. Defaults 100ms and 5s.
	RetryBackoff, MaxRetryBackoff time.Duration
	// DeadLetterTopic receives the records that could not be handled.
	// Default Group + ".dlq". Run creates it when it does not exist
	// (partitions and replication from the broker's defaults).
	DeadLetterTopic string
	// MaxPollRecords bounds the records of one poll; a partition whose
	// worker has twice as many queued stops being fetched until it has
	// handled half of them. Default 500.
	MaxPollRecords int
	// CommitInterval is how often the offsets of the records each
	// partition finished are committed (and when Run ends, and when a
	// partition is revoked). A crash redelivers at most about this much
	// of each partition; the table skips it. Default 1s.
	CommitInterval time.Duration
	// HandlerTimeout bounds one attempt of the Handler (and of
	// OnDuplicate): its ctx ends then, and an attempt past it counts as a
	// failed attempt (retried, then dead-lettered) — as long as the
	// Handler returns when its ctx ends (pgx's calls do). Default 30s.
	//
	// N.B. a revocation waits for the attempts in hand of its partitions
	// (not for their retries): keep HandlerTimeout under the group's
	// rebalance timeout (kgo.RebalanceTimeout, default 60 s), or the
	// group goes on without this member; its records are then delivered
	// again, which the table absorbs.
	HandlerTimeout time.Duration
	// InstanceID is this member's static group membership id
	// (kgo.InstanceID): a restarted member that comes back within the
	// session timeout gets its partitions back at once, without a
	// rebalance, instead of the group waiting for the dead member's
	// session timeout first. Default DefaultInstanceID(): the host name.
	// DynamicMembership ("-") turns it off. Two processes running with
	// one instance id fence each other: the one that joined last wins,
	// the other's Run returns an error. See docs/inbox.md, "Production
	// settings", for the trade-offs.
	InstanceID string
	// LeaveGroupOnStop makes a static member leave the group when Run
	// ends on its context (kgo does not: a static member that restarts
	// under the same id keeps its partitions). Set it where a stopped
	// process does not come back under the same instance id (pods of a
	// Deployment named by the host name): its partitions move at once
	// instead of after the session timeout. Default false.
	LeaveGroupOnStop bool
	// OnDuplicate, if set, is called in the transaction of a record whose
	// id is in the table already (Kafka delivered it again), instead of the
	// Handler. Its error is treated like the Handler's. Default: nothing.
	OnDuplicate Handler
	// Logger receives the Consumer's lines (group changes, retries, dead
	// letters), their attributes as key-value pairs: a *slog.Logger
	// (slog.Default()), inbox.ZapLogger(z) for zap, or any Logger. Default:
	// New's *zap.Logger argument, else nothing.
	Logger Logger
	// KafkaOpts are added to the client's options: TLS, SASL,
	// SessionTimeout, a logger. The options Consumer sets for its delivery
	// guarantee (ConsumerGroup, ConsumeTopics, DisableAutoCommit,
	// BlockRebalanceOnPoll, the partition callbacks) come after them and
	// win.
	KafkaOpts []kgo.Opt
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.IDHeader == "" {
		c.IDHeader = "id"
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = 5 * time.Second
	}
	if c.DeadLetterTopic == "" && c.Group != "" {
		c.DeadLetterTopic = c.Group + ".dlq"
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 500
	}
	if c.MaxBatchRecords == 0 {
		c.MaxBatchRecords = c.MaxPollRecords
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = time.Second
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = 30 * time.Second
	}
	if c.InstanceID == "" {
		c.InstanceID = DefaultInstanceID()
	}
}

// Validate reports every problem of c (after defaults) at once.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: none given (host:port of at least one Kafka broker)"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("group: empty (the Kafka consumer group)"))
	} else if err := checkID([]byte(c.Group)); err != nil {
		errs = append(errs, fmt.Errorf("group: %q is not UTF-8 text without NUL bytes (it is written to the inbox table's consumer column)", c.Group))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("topics: none given"))
	}
	if c.TopicsRegex {
		for _, t := range c.Topics {
			if _, err := regexp.Compile(t); err != nil {
				errs = append(errs, fmt.Errorf("topics: %q is not a regular expression: %w", t, err))
			}
		}
	}
	if c.Pool == nil {
		errs = append(errs, errors.New("pool: nil (a *pgxpool.Pool on the database of the inbox table)"))
	}
	if c.Handler == nil && c.BatchHandler == nil {
		errs = append(errs, errors.New("handler: nil (set Handler, BatchHandler or both)"))
	}
	if c.MaxBatchRecords < 1 {
		errs = append(errs, fmt.Errorf("max batch records: %d, want 1 or more", c.MaxBatchRecords))
	}
	if n := strings.Count(c.Table, ".") + 1; n > 2 || strings.HasPrefix(c.Table, ".") || strings.HasSuffix(c.Table, ".") {
		errs = append(errs, fmt.Errorf("table: %q is not table or schema.table", c.Table))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts: %d, want 1 or more", c.MaxAttempts))
	}
	if c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("retry backoff: %s up to %s, want 0 < first <= max", c.RetryBackoff, c.MaxRetryBackoff))
	}
	if c.MaxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("max poll records: %d, want 1 or more", c.MaxPollRecords))
	}
	if c.OnFailure < DeadLetter || c.OnFailure > Halt {
		errs = append(errs, fmt.Errorf("on failure: %s, want DeadLetter, HoldKey or Halt", c.OnFailure))
	}
	if c.CommitInterval < 0 || c.HandlerTimeout < 0 {
		errs = append(errs, fmt.Errorf("commit interval %s, handler timeout %s: want more than 0", c.CommitInterval, c.HandlerTimeout))
	}
	for _, t := range c.Topics {
		if t == c.DeadLetterTopic {
			errs = append(errs, fmt.Errorf("dead-letter topic %q is also consumed (a record that fails would come back for ever)", t))
		}
	}
	return errors.Join(errs...)
}

// permanent marks an error that retrying cannot cure.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the record is dead-lettered at once instead
// of being tried again (a payload that does not parse, an unknown version).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}
