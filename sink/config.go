package sink

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/cli"

	"github.com/walrelay/walrelay/internal/kafkaconn"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/budget"
)

// Config configures the Kafka producer: what a user sets, validated.
// Zero values mean the defaults named. What the sink is handed besides
// (the tracker, state that outlives it, tests' and benchmarks' switches)
// is Deps.
type Config struct {
	// Brokers are the seed brokers, host:port. Default localhost:9092.
	Brokers []string
	// ClientID is sent to Kafka. Default "walrelay".
	ClientID string
	// Compression is none, gzip, snappy, lz4 or zstd. Default lz4: outbox
	// payloads are JSON, which lz4 shrinks by about half for a few percent
	// of one core, and every Kafka consumer since 0.8.2 reads it.
	Compression string
	// DeliveryTimeout bounds how long a record may wait for Kafka's
	// acknowledgement after it was handed to the client, retries included,
	// before it finally fails (Java's delivery.timeout.ms). It does not
	// bound how long a transaction takes. Default 2m.
	DeliveryTimeout time.Duration
	// MaxInflightBytes bounds the records buffered or in flight, each
	// counted as its key, value and headers plus RecordOverhead, so that
	// it bounds the memory they hold; producing blocks when it is reached.
	// Default DefaultMaxInflightBytes.
	MaxInflightBytes int
	// MaxMessageBytes is the largest record batch sent (the broker's
	// message.max.bytes). A topic whose own max.message.bytes is smaller
	// gets batches of at most that; a record larger than its topic's cap
	// on its own is dead-lettered. Default 1048588, Kafka's broker
	// default.
	MaxMessageBytes int32
	// Linger is how long a partition waits for more records before sending
	// (Java's linger.ms) while transactions come fast enough for it to
	// gather lingerWorth of them; at a lower rate records go once the relay
	// has caught up (Send). At most a minute and below DeliveryTimeout. The
	// sink also sends what lingers at once whenever it waits for an
	// acknowledgement: for room under MaxInflightBytes, or for a record it
	// isolates. Default 0: send as soon as a request can be built; the
	// command line's default is 5ms.
	Linger time.Duration
	// CreateTopics creates a missing topic before the first record goes to
	// it. Without it a missing topic is an error. Default (zero value) false;
	// the command line's default is true.
	CreateTopics bool
	// TopicPartitions is the partition count of created topics. Default 6.
	TopicPartitions int32
	// TopicReplicationFactor is the replication factor of created topics.
	// Default -1: the broker's default.replication.factor.
	TopicReplicationFactor int16
	// TopicAllow is a regular expression every record's topic must match
	// as a whole (topics.go). An event routed to another topic is a poison
	// event (reason topic_not_allowed): dead-lettered or halted on as
	// OnPoison says, and its topic is never created. Whatever it allows,
	// an event never goes to DeadLetterTopic, CheckpointTopic or a topic
	// named "__..." (Kafka's internal ones). Default "": every topic the
	// route produces.
	TopicAllow string
	// MaxCreatedTopics caps the topics walrelay creates (CreateTopics),
	// counted in Deps.CreatedTopics; an event whose missing topic would be one
	// more is a poison event (reason topic_limit). Topics that exist are
	// not counted, nor the dead-letter and checkpoint topics. Default 0:
	// no cap; the command line's default is 100.
	MaxCreatedTopics int
	// Kafka is how the sink's clients reach Kafka: TLS and SASL
	// (kafkaconn.Security.Resolve). Default zero: plaintext, no SASL.
	Kafka kafkaconn.Conn
	// OnPoison is OnPoisonDeadLetter (default), OnPoisonPark (park.go) or
	// OnPoisonHalt.
	OnPoison string
	// DeadLetterTopic receives poison events. Default "walrelay.dlq".
	DeadLetterTopic string

	// Shared, if set, is the Kafka client the sink produces through,
	// shared with other pipelines (shared.go; set by package fleet, not a
	// user's setting); an exactly-once sink ignores it. Default nil: a
	// client of its own.
	Shared *SharedClient
	// InflightPool, if set, is the pipeline's account of the process's
	// in-flight bound (package fleet's max-inflight-bytes at the top of its
	// file), which the records count against besides MaxInflightBytes.
	// Default nil: none.
	InflightPool *budget.Account

	// ExactlyOnce produces inside Kafka transactions with a checkpoint
	// record, confirming a transaction only after its Kafka transaction
	// committed (exactlyonce.go). Default false.
	ExactlyOnce bool
	// TransactionalID is the producer's transactional.id. Default
	// "walrelay-" + the slot (WithSlot; New takes Deps.Source.Slot): a
	// second walrelay on the slot fences the first.
	TransactionalID string
	// CheckpointTopic is the compacted topic of checkpoint records.
	// Default "walrelay.checkpoints".
	CheckpointTopic string
	// TransactionTimeout is Kafka's transaction.timeout.ms for the
	// producer, at most the broker's transaction.max.timeout.ms. Default 5m.
	TransactionTimeout time.Duration
	// CommitInterval is how long a Kafka transaction gathers whole
	// PostgreSQL transactions before it is committed. Default 100ms.
	CommitInterval time.Duration
	// TransactionMaxRecords commits a Kafka transaction once it holds this
	// many records (at the end of a PostgreSQL transaction). Default 50000.
	TransactionMaxRecords int
}

// WithSlot returns c with TransactionalID's default for slot when it is
// unset ("walrelay-" + slot: a second walrelay on the slot fences the
// first); an empty slot leaves it unset. The one place of that default:
// New and `walrelay check`'s probe both take it from here.
func (c Config) WithSlot(slot string) Config {
	if c.TransactionalID == "" && slot != "" {
		c.TransactionalID = "walrelay-" + slot
	}
	return c
}

// DefaultMaxInflightBytes is MaxInflightBytes' default, 16 MiB: about
// 11,000 outbox records of 300 bytes, which Kafka acknowledges in a few
// tens of milliseconds.
//
// N.B. a larger window adds memory, not throughput: it only fills while
// Kafka is slower than the slot, and then it is a queue. In drains of a
// million rows alternated on one bed, 16, 32 and 64 MiB relayed at the
// same rate, while the peak RSS of 100,000-row transactions was 46-50,
// 60 and 48-98 MiB (bench/results/2026-12-05-*-inflight*). It still holds
// sixteen batches of the largest record Kafka takes by default.
const DefaultMaxInflightBytes = 16 << 20

var compressions = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

func (c Config) withDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{"localhost:9092"}
	}
	if c.ClientID == "" {
		c.ClientID = "walrelay"
	}
	if c.Compression == "" {
		c.Compression = "lz4"
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 2 * time.Minute
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1048588
	}
	if c.TopicPartitions == 0 {
		c.TopicPartitions = 6
	}
	if c.TopicReplicationFactor == 0 {
		c.TopicReplicationFactor = -1
	}
	if c.OnPoison == "" {
		c.OnPoison = OnPoisonDeadLetter
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = "walrelay.dlq"
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = DefaultCheckpointTopic
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 5 * time.Minute
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.TransactionMaxRecords == 0 {
		c.TransactionMaxRecords = 50000
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for _, b := range c.Brokers {
		if b == "" || !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("broker %q: want host:port", b))
		}
	}
	if _, ok := compressions[c.Compression]; !ok {
		errs = append(errs, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", c.Compression))
	}
	if c.DeliveryTimeout < time.Second {
		errs = append(errs, fmt.Errorf("delivery timeout %s: want at least 1s", c.DeliveryTimeout))
	}
	// N.B. franz-go refuses a linger above a minute; one as long as the
	// delivery timeout would fail the records it holds.
	if c.Linger < 0 || c.Linger > time.Minute || c.Linger >= c.DeliveryTimeout {
		errs = append(errs, fmt.Errorf("linger %s: want 0 to 1m, and below the delivery timeout (%s)", c.Linger, c.DeliveryTimeout))
	}
	if c.MaxMessageBytes < 1024 {
		errs = append(errs, fmt.Errorf("max message bytes %d: want at least 1024", c.MaxMessageBytes))
	}
	if c.MaxInflightBytes < int(c.MaxMessageBytes) {
		errs = append(errs, fmt.Errorf("--max-inflight-bytes %d is below --kafka-max-message-bytes %d: raise --max-inflight-bytes (or lower --kafka-max-message-bytes) so that one record fits", c.MaxInflightBytes, c.MaxMessageBytes))
	}
	if c.TopicPartitions < 1 {
		errs = append(errs, fmt.Errorf("topic partitions %d: want at least 1", c.TopicPartitions))
	}
	if c.OnPoison != OnPoisonDeadLetter && c.OnPoison != OnPoisonHalt && c.OnPoison != OnPoisonPark {
		errs = append(errs, fmt.Errorf("on-poison %q: want %s, %s or %s", c.OnPoison, OnPoisonDeadLetter, OnPoisonPark, OnPoisonHalt))
	}
	if err := decode.ValidTopic(c.DeadLetterTopic); err != nil {
		errs = append(errs, fmt.Errorf("dead-letter topic: %w", err))
	}
	if _, err := compileTopicAllow(c.TopicAllow); err != nil {
		errs = append(errs, err)
	}
	if c.MaxCreatedTopics < 0 {
		errs = append(errs, fmt.Errorf("max created topics %d: want 0 (no cap) or more", c.MaxCreatedTopics))
	}
	if c.TopicReplicationFactor < -1 || c.TopicReplicationFactor == 0 {
		errs = append(errs, fmt.Errorf("topic replication factor %d: want -1 (broker default) or at least 1", c.TopicReplicationFactor))
	}
	errs = append(errs, c.validateExactlyOnce()...)
	return errors.Join(errs...)
}

// txnLimit is how long a Kafka transaction may stay open before the sink
// gives up on it: 3/4 of the transaction timeout, the rest for the commit.
func (c Config) txnLimit() time.Duration { return c.TransactionTimeout * 3 / 4 }

// validateExactlyOnce adds the problems of the exactly-once settings.
func (c Config) validateExactlyOnce() []error {
	if !c.ExactlyOnce {
		return nil
	}
	var errs []error
	if err := decode.ValidTopic(c.CheckpointTopic); err != nil {
		errs = append(errs, fmt.Errorf("checkpoint topic: %w", err))
	}
	// N.B. a record may wait for Kafka up to the delivery timeout: a
	// transaction that cannot outlast that would be aborted by the broker
	// while walrelay still waits, and look like a fencing.
	if c.TransactionTimeout <= c.DeliveryTimeout {
		errs = append(errs, fmt.Errorf("--kafka-transaction-timeout %s is not above --kafka-delivery-timeout %s: with --exactly-once a Kafka transaction must outlast a record's wait for Kafka; raise it (at most the broker's transaction.max.timeout.ms, default 15m) or lower the delivery timeout",
			c.TransactionTimeout, c.DeliveryTimeout))
	}
	if c.CommitInterval <= 0 || c.CommitInterval > c.TransactionTimeout/4 {
		errs = append(errs, fmt.Errorf("--transaction-commit-interval %s: want more than 0 and at most a quarter of --kafka-transaction-timeout (%s)", c.CommitInterval, c.TransactionTimeout/4))
	}
	if c.TransactionMaxRecords < 1 {
		errs = append(errs, fmt.Errorf("transaction max records %d: want at least 1", c.TransactionMaxRecords))
	}
	return errs
}

// RegisterFlags binds c's fields to walrelay's flags, with the command
// line's defaults and help (some differ from the zero value's defaults:
// Linger 5ms, CreateTopics true, MaxCreatedTopics 100). --brokers,
// --topic-partitions, --topic-replication-factor and
// --kafka-max-message-bytes are the command's, range-checked before they
// become Brokers and the others.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	cli.BoolVar(fs, &c.CreateTopics, "create-topics", true, "create a missing topic through the admin API before its first record")
	fs.StringVar(&c.TopicAllow, "topic-allow", "", "regular expression every record's topic must match as a whole (e.g. 'outbox\\.event\\.[a-z_]+'); an event routed elsewhere is dead-lettered (reason topic_not_allowed) or, with --on-poison=halt, stops walrelay, and its topic is never created (empty: any topic; the dead-letter and checkpoint topics and __* are refused always)")
	fs.IntVar(&c.MaxCreatedTopics, "max-created-topics", 100, "most topics walrelay creates under --create-topics while it runs; an event whose missing topic would be one more is dead-lettered (reason topic_limit) or halts (0: no cap; existing topics do not count)")
	cli.SizeVar(fs, &c.MaxInflightBytes, "max-inflight-bytes", DefaultMaxInflightBytes, "bytes of records buffered or in flight to Kafka (key, value and headers plus 1 KiB each) before reading from PostgreSQL pauses; bounds memory")
	fs.StringVar(&c.Compression, "kafka-compression", "lz4", "record batch compression: none, gzip, snappy, lz4 or zstd")
	cli.DurationVar(fs, &c.DeliveryTimeout, "kafka-delivery-timeout", 2*time.Minute, "how long a record may wait for Kafka's acknowledgement after it is handed to the client, retries included, before it fails and streaming restarts from the last confirmed position; a transaction may take longer")
	cli.DurationVar(fs, &c.Linger, "kafka-linger", 5*time.Millisecond, "how long a partition waits for more records before sending (Java's linger.ms; at most 1m, below --kafka-delivery-timeout; 0: never) while transactions come fast enough for it to gather 10 of them (2,000/s at 5ms); slower, records go as soon as walrelay has caught up with the slot; what lingers goes at once when walrelay waits for room under --max-inflight-bytes")
	fs.StringVar(&c.OnPoison, "on-poison", "dead-letter", "an event that cannot become a Kafka record: dead-letter (write it to --dlq-topic and go on), park (dead-letter it and its aggregate's later events until walrelay dlq redrive; docs/dlq.md) or halt (stop without confirming past it)")
	fs.StringVar(&c.DeadLetterTopic, "dlq-topic", "walrelay.dlq", "dead-letter topic for poison events")
	cli.BoolVar(fs, &c.ExactlyOnce, "exactly-once", false, "produce each PostgreSQL transaction inside a Kafka transaction with an LSN checkpoint on --checkpoint-topic, and skip on restart what a committed checkpoint covers: read_committed consumers see every event once (see docs/exactly-once.md)")
	fs.StringVar(&c.CheckpointTopic, "checkpoint-topic", DefaultCheckpointTopic, "compacted Kafka topic of walrelay's checkpoints: the marker of each slot walrelay streamed from (a slot whose marker remains is never created again) and, with --exactly-once, the checkpoint committed in each Kafka transaction; created with cleanup.policy=compact under --create-topics")
	fs.StringVar(&c.TransactionalID, "transactional-id", "", "Kafka transactional.id with --exactly-once (default walrelay-<slot>): a second walrelay with the same id fences the first")
	cli.DurationVar(fs, &c.TransactionTimeout, "kafka-transaction-timeout", 5*time.Minute, "Kafka transaction.timeout.ms with --exactly-once: above --kafka-delivery-timeout, at most the broker's transaction.max.timeout.ms (default 15m); a PostgreSQL transaction not relayed within 3/4 of it stops walrelay (exit 2)")
	cli.DurationVar(fs, &c.CommitInterval, "transaction-commit-interval", 100*time.Millisecond, "with --exactly-once, how long a Kafka transaction gathers whole PostgreSQL transactions before it commits (more throughput, more latency)")
}
