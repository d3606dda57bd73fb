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
// Permanent to dead-letter at once.
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
	// Required. Each partition being handled holds one connection for its
	// transaction: give the pool at least as many connections as
	// partitions this member may own (pgxpool's pool_max_conns), or
	// partitions wait for one another.
	Pool *pgxpool.Pool
	// Handler applies one record. Required.
	Handler Handler

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
	// RetryBackoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxRetryBackoff. Defaults 100ms and 5s.
	RetryBackoff, MaxRetryBackoff time.Duration
	// DeadLetterTopic receives the records that could not be handled.
	// Default Group + ".dlq". Run creates it when it does not exist
	// (partitions and replication from the broker's defaults).
	DeadLetterTopic string
	// MaxPollRecords bounds the records handled between two offset
	// commits (and between two rebalance points). Default 500.
	//
	// N.B. a rebalance waits until the polled records are handled: that
	// time (with retries: MaxAttempts and the backoff) must stay under the
	// group's rebalance timeout (kgo.RebalanceTimeout, default 60 s), or
	// the group goes on without this member; its offset commits then fail
	// and its records are delivered again, which the table absorbs.
	MaxPollRecords int
	// OnDuplicate, if set, is called in the transaction of a record whose
	// id is in the table already (Kafka delivered it again), instead of the
	// Handler. Its error is treated like the Handler's. Default: nothing.
	OnDuplicate Handler
	// KafkaOpts are added to the client's options: TLS, SASL, InstanceID,
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
}

// Validate reports every problem of c (after defaults) at once.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: none given (host:port of at least one Kafka broker)"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("group: empty (the Kafka consumer group)"))
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
	if c.Handler == nil {
		errs = append(errs, errors.New("handler: nil"))
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
