package sink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/budget"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/rate"
	"github.com/walrelay/walrelay/kafkastate"
)

// Config configures the Kafka producer. Zero values mean the defaults named.
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
	// counted in CreatedTopics; an event whose missing topic would be one
	// more is a poison event (reason topic_limit). Topics that exist are
	// not counted, nor the dead-letter and checkpoint topics. Default 0:
	// no cap; the command line's default is 100.
	MaxCreatedTopics int
	// CreatedTopics counts the topics created for MaxCreatedTopics.
	// Default nil: the sink's own, which does not outlive it.
	CreatedTopics *CreatedTopics
	// Opts are extra client options (TLS, SASL), applied last.
	Opts []kgo.Opt
	// Null acknowledges every event at once without Kafka: a benchmark
	// option that separates decoding from producing. Never for production.
	Null bool
	// OnPoison is OnPoisonDeadLetter (default) or OnPoisonHalt.
	OnPoison string
	// DeadLetterTopic receives poison events. Default "walrelay.dlq".
	DeadLetterTopic string
	// Metrics, if set, counts published, dead-lettered and failed records.
	Metrics *metrics.Metrics
	// Isolation carries across restarts the records to produce one at a
	// time after Kafka rejected a batch of them. Default nil: the sink's
	// own, which does not outlive it.
	Isolation *Isolation

	// ExactlyOnce produces inside Kafka transactions with a checkpoint
	// record, confirming a transaction only after its Kafka transaction
	// committed (exactlyonce.go). Default false.
	ExactlyOnce bool
	// Source names the slot for the checkpoint key; the relay sets it.
	Source kafkastate.Source
	// TransactionalID is the producer's transactional.id. Default
	// "walrelay-" + Source.Slot: a second walrelay on the slot fences the
	// first.
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
	if c.TransactionalID == "" && c.Source.Slot != "" {
		c.TransactionalID = "walrelay-" + c.Source.Slot
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
		errs = append(errs, fmt.Errorf("max in-flight bytes %d is below max message bytes %d: raise it so one record fits", c.MaxInflightBytes, c.MaxMessageBytes))
	}
	if c.TopicPartitions < 1 {
		errs = append(errs, fmt.Errorf("topic partitions %d: want at least 1", c.TopicPartitions))
	}
	if c.OnPoison != OnPoisonDeadLetter && c.OnPoison != OnPoisonHalt {
		errs = append(errs, fmt.Errorf("on-poison %q: want %s or %s", c.OnPoison, OnPoisonDeadLetter, OnPoisonHalt))
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

// ErrTopicMissing is wrapped when a topic does not exist and CreateTopics is off.
var ErrTopicMissing = errors.New("topic does not exist")

// ErrPoison is wrapped when an event cannot become a record and the relay
// must halt on it.
var ErrPoison = errors.New("poison event")

// Sink produces events. Produce is called from one goroutine.
type Sink struct {
	cfg     Config
	log     *zap.Logger
	cl      *kgo.Client
	adm     *kadm.Client
	tr      *checkpoint.Tracker
	metrics *metrics.Metrics
	failed  chan struct{}
	closing chan struct{}
	budget  *budget.Budget
	limits  *topicLimits
	clock   handoffClock
	allow   *regexp.Regexp // nil: every topic
	created *CreatedTopics

	// Used by the producing goroutine only.
	known      map[string]int32 // checked topics and their batch caps
	partitions map[string]int32 // checked topics and their partition counts
	cur        *checkpoint.Tx
	h, last    *handoff // the open handoff; the last one sealed
	hn         int      // records in h (or last)
	handoffAge time.Duration
	isoThrough pglogrepl.LSN                   // isolating the transactions up to this commit LSN
	isoTopics  atomic.Pointer[map[string]bool] // of these topics; nil when not isolating (read by batchFailed too)
	fresh      bool                            // the part being produced has a topic's first records
	lingering  bool                            // records were produced since the last send
	rate       rate.Meter                      // transaction parts produced, for Send
	flushDone  chan struct{}                   // closed when sendLingering's flush has ended

	iso        *Isolation
	lastCommit atomic.Uint64 // commit LSN of the newest transaction begun
	eos        *eos          // nil unless ExactlyOnce

	errOnce   sync.Once
	err       error
	closeOnce sync.Once

	// held is the Context of every record the sink produces: once it is
	// done, the client fails a batch that starts with such a record
	// instead of sending it. hold ends it when a record has finally
	// failed, and franz-go's logger ends it the moment Kafka fails a
	// batch, before the sink hears of it.
	//
	// N.B. franz-go fails the rejected batch with every record buffered
	// to its partition, under the partition's lock, and then goes on:
	// a record handed to that partition before the promise reaches the
	// sink starts a new batch, which the broker writes ahead of the
	// rejected records (a later transaction's record went ahead of 40
	// in a CI run of TestTopicLimitLoweredWhileRunning). The client logs
	// the failure under that lock, before it fails the records, so no
	// record buffered after them is sent.
	held context.Context
	hold context.CancelFunc
}

// New builds a client; it does not connect until Ping or Produce.
func New(cfg Config, tr *checkpoint.Tracker, log *zap.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log = log.Named("sink")
	limits := &topicLimits{def: cfg.MaxMessageBytes}
	held, hold := context.WithCancel(context.Background())
	var s *Sink
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		// N.B. the logger holds back every record once Kafka has failed
		// a batch (see held).
		kgo.WithLogger(zapLogger{l: log.Named("kgo"), batchFailed: func(topic string) { s.batchFailed(topic) }}),
		// N.B. acks from all in-sync replicas and idempotent writes (the
		// franz-go default, never disabled here): a retried batch is written
		// once and in order.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// N.B. retries are bounded only by the delivery timeout, which the
		// watchdog below enforces: franz-go's own RecordDeliveryTimeout counts
		// from the record's timestamp, which is the commit time, so it would
		// fail at once every record of a backlog older than the timeout.
		// Stop rather than go on when the broker reports lost data.
		kgo.StopProducerOnDataLossDetected(),
		// The topic was checked or created before its first record; a
		// transiently unknown topic is retried within the delivery timeout.
		kgo.UnknownTopicRetries(-1),
		// N.B. Kafka's murmur2 key hashing, so a Java producer picks the same
		// partition for the same aggregate id.
		// A record with a partition of its own (--partition-column) keeps
		// it (explicitPartition).
		kgo.RecordPartitioner(partitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerBatchCompression(compressions[cfg.Compression]),
		// N.B. each topic's batches are capped at its own max.message.bytes
		// when that is smaller (read in ensureTopic before the topic's first
		// record): a broker rejects a larger batch as a whole, and franz-go
		// then fails every buffered record of the partition with it.
		kgo.ProducerBatchMaxBytesFn(limits.batchMax),
		// N.B. the budget (reserve) binds first: it counts every record's
		// overhead too.
		kgo.MaxBufferedBytes(cfg.MaxInflightBytes),
		kgo.MaxBufferedRecords(1 << 30),
		kgo.ProducerLinger(cfg.Linger),
		kgo.WithHooks(kafkaHook{cfg.Metrics}),
	}
	if cfg.Compression == "lz4" {
		opts = append(opts, kgo.WithCompressor(newLz4Compressor()))
	}
	if cfg.ExactlyOnce {
		// N.B. a transactional producer: records are visible to
		// read_committed consumers only once their transaction commits,
		// and a newer producer of the same id fences this one.
		opts = append(opts, kgo.TransactionalID(cfg.TransactionalID), kgo.TransactionTimeout(cfg.TransactionTimeout))
	}
	opts = append(opts, cfg.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		hold()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	s = &Sink{
		cfg:        cfg,
		log:        log,
		cl:         cl,
		adm:        kadm.NewClient(cl),
		tr:         tr,
		metrics:    cfg.Metrics,
		known:      make(map[string]int32),
		partitions: make(map[string]int32),
		failed:     make(chan struct{}),
		held:       held,
		hold:       hold,
		closing:    make(chan struct{}),
		budget:     budget.New(int64(cfg.MaxInflightBytes)),
		limits:     limits,
		handoffAge: cfg.DeliveryTimeout / 16,
		rate:       rate.PerWait(lingerWorth, cfg.Linger),
		iso:        cfg.Isolation,
		created:    cfg.CreatedTopics,
	}
	s.allow, _ = compileTopicAllow(cfg.TopicAllow) // checked by Validate
	if s.created == nil {
		s.created = NewCreatedTopics()
	}
	if s.iso == nil {
		s.iso = NewIsolation()
	}
	if cfg.ExactlyOnce {
		s.eos = &eos{activate: make(chan struct{})}
	}
	if through, topics := s.iso.snapshot(); topics != nil {
		s.isoThrough = through
		s.isoTopics.Store(&topics)
		log.Warn("kafka rejected a record batch: producing the records of its topics one at a time, to find the record at fault",
			zap.Strings("topics", slices.Sorted(maps.Keys(topics))), zap.Stringer("through_commit_lsn", through))
	}
	go s.watchdog()
	return s, nil
}

// watchdog fails the sink when a record stays unacknowledged longer than
// the delivery timeout after it was handed to the client.
func (s *Sink) watchdog() {
	every := min(time.Second, s.cfg.DeliveryTimeout/4)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		if oldest := s.clock.oldest(); !oldest.IsZero() {
			if age := time.Since(oldest); age > s.cfg.DeliveryTimeout {
				s.metrics.Failure()
				s.fail(fmt.Errorf("kafka has not acknowledged a record handed to it %s ago (--kafka-delivery-timeout %s): %w",
					age.Round(time.Second), s.cfg.DeliveryTimeout, kgo.ErrRecordTimeout))
				return
			}
		}
	}
}

// Start checks that a broker answers and that the dead-letter topic
// exists (creating it if allowed).
func (s *Sink) Start(ctx context.Context) error {
	if s.cfg.Null {
		return nil
	}
	if err := s.cl.Ping(ctx); err != nil {
		return fmt.Errorf("reach kafka at %s: %w", strings.Join(s.cfg.Brokers, ","), err)
	}
	if s.cfg.OnPoison == OnPoisonDeadLetter {
		if err := s.ensureTopic(ctx, s.cfg.DeadLetterTopic); err != nil {
			return err
		}
	}
	if s.eos != nil {
		return s.startExactlyOnce(ctx)
	}
	return nil
}

// Ping checks that a broker answers.
func (s *Sink) Ping(ctx context.Context) error {
	if s.cfg.Null {
		return nil
	}
	return s.cl.Ping(ctx)
}

type kafkaHook struct{ m *metrics.Metrics }

// OnBrokerE2E counts failed produce requests (key 0), which the client retries.
func (h kafkaHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == 0 && e2e.Err() != nil {
		h.m.KafkaError()
	}
}

// Failed is closed when a record has finally failed; Err then says why.
func (s *Sink) Failed() <-chan struct{} { return s.failed }

// Err returns the first failure, or nil.
func (s *Sink) Err() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// batchFailed is called by the client's logger when Kafka has failed a
// batch of topic, before the client fails its records (held). A record
// isolated is produced alone and waited for: its rejection holds nothing
// back, and the records of other topics go on.
func (s *Sink) batchFailed(topic string) {
	if m := s.isoTopics.Load(); m != nil && (*m)[topic] {
		return
	}
	s.hold()
}

func (s *Sink) fail(err error) {
	s.hold()
	s.errOnce.Do(func() {
		s.err = err
		close(s.failed)
	})
}

// Produce hands one Tx part to Kafka asynchronously. It blocks only while
// MaxInflightBytes are buffered, or for each record it isolates. A part
// whose events include a poison event halts: its earlier events are
// produced, nothing from the poison event on.
func (s *Sink) Produce(ctx context.Context, tx *decode.Tx) error {
	if err := s.Err(); err != nil {
		return err
	}
	if e := s.eos; e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if tx.First {
			skip, err := s.eosFirst(ctx, tx)
			if err != nil {
				return err
			}
			if skip {
				s.eosSkip(tx)
				return nil
			}
		} else if e.skipping != nil {
			s.eosSkip(tx)
			return nil
		}
	}
	if tx.First {
		if s.isoTopics.Load() != nil && tx.CommitLSN > s.isoThrough {
			// N.B. every isolated record before this transaction was
			// acknowledged (or dead-lettered) one at a time.
			s.iso.finish(s.isoThrough)
			s.log.Info("isolation done: producing in batches again", zap.Stringer("through_commit_lsn", s.isoThrough))
			s.isoThrough = 0
			s.isoTopics.Store(nil)
		}
		s.cur = s.tr.Begin(tx.CommitLSN)
		s.lastCommit.Store(uint64(tx.CommitLSN))
	}
	if s.cur == nil {
		return fmt.Errorf("transaction %d part without its first part", tx.Xid)
	}
	if s.cfg.Null {
		return s.produceNull(tx)
	}
	refused, err := s.ensureTopics(ctx, tx.Events)
	if err != nil {
		return err
	}
	if n := len(tx.Events); n > 0 {
		if s.eos != nil {
			if err := s.eosJoin(); err != nil {
				return err
			}
			s.eos.records += n
			s.eos.curRecs.Add(int64(n))
		}
		defer s.sealHandoff()
		extra := len(tx.Events[0].Headers) + 1
		recs := make([]kgo.Record, n)
		hdrs := make([]kgo.RecordHeader, 0, n*extra)
		meta := partMeta(tx)
		var a *txAcks
		for i := range tx.Events {
			ev := &tx.Events[i]
			if ev.Err != nil {
				if a, err = s.poison(ctx, tx, ev, a, meta); err != nil {
					return err
				}
				continue
			}
			start := len(hdrs)
			hdrs = append(hdrs, kgo.RecordHeader{Key: "id", Value: ev.ID})
			for _, h := range ev.Headers {
				hdrs = append(hdrs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			r := &recs[i]
			r.Topic = ev.Topic
			r.Key = ev.Key
			r.Value = ev.Value
			r.Headers = hdrs[start:len(hdrs):len(hdrs)]
			r.Timestamp = tx.CommitTime
			r.Context = s.held
			if why := refused[r.Topic]; why != nil {
				if a, err = s.refuseRecord(ctx, tx, r, why, a, meta); err != nil {
					return err
				}
				continue
			}
			if !ev.Timestamp.IsZero() {
				r.Timestamp = ev.Timestamp
			}
			if ev.HasPartition {
				poison, err := s.checkPartition(ctx, ev)
				if err != nil {
					return err
				}
				if poison != nil {
					hdrs = hdrs[:start]
					ev.Err = poison
					if a, err = s.poison(ctx, tx, ev, a, meta); err != nil {
						return err
					}
					continue
				}
				r.Partition = explicitPartition(ev.Partition)
			}
			if limit := s.known[r.Topic]; loneBatchBytes(r) > int(limit) {
				// N.B. too large for its topic on its own, so in any batch:
				// the client would fail it alone (kerr.MessageTooLarge).
				if a, err = s.rejectTooLarge(ctx, tx, r, limit, a, meta); err != nil {
					return err
				}
				continue
			}
			if s.isolated(tx, r.Topic) {
				if err := s.produceIsolated(ctx, tx, r, meta); err != nil {
					return err
				}
				continue
			}
			if a, err = s.handOver(ctx, r, a, meta); err != nil {
				return err
			}
			s.cur.Add(1)
			s.cl.Produce(ctx, r, a.done)
		}
		s.lingering = true
		if s.cfg.Linger > 0 {
			s.rate.Count(time.Now())
		}
		if s.fresh {
			// N.B. the first records of a topic wait for the client to
			// load its partitions, and then for their linger: ending the
			// lingers later (Send) would miss them.
			s.fresh = false
			s.sendLingering()
		}
	}
	if tx.Last {
		s.cur.Close(tx.EndLSN)
		s.cur = nil
		if s.eos != nil {
			return s.eosLast(ctx, tx)
		}
	}
	return nil
}

// handOver reserves r's bytes and counts r in the open handoff, returning
// the promise to produce it with (a, or a new one when the handoff
// changed).
func (s *Sink) handOver(ctx context.Context, r *kgo.Record, a *txAcks, meta recordMeta) (*txAcks, error) {
	cost := recordCost(r)
	if !s.budget.TryAcquire(cost) {
		// N.B. waiting for room is not waiting for Kafka: the handoff is
		// sealed meanwhile, and the records after the wait are timed anew
		// unless the handoff is still young.
		s.sealHandoff()
		// N.B. room is made by acknowledgements: records left to linger
		// would hold it until their linger ends.
		s.sendLingering()
		if !s.budget.Acquire(ctx, cost, s.failed) {
			if err := s.Err(); err != nil {
				return nil, err
			}
			return nil, ctx.Err()
		}
	}
	if s.h == nil || s.hn >= handoffRecords {
		s.sealHandoff()
		if l := s.last; l != nil && s.hn < handoffRecords && time.Since(l.at) < s.handoffAge && l.reopen() {
			s.h = l
		} else {
			s.h, s.hn = s.clock.open(), 0
		}
		s.last = nil
	}
	if a == nil || a.h != s.h {
		a = &txAcks{s: s, x: s.cur, meta: meta, h: s.h, handed: time.Now()}
	}
	s.hn++
	s.h.pending.Add(1)
	return a, nil
}

// lingerWorth is how many transaction parts must be produced per linger
// for the records to wait for it (Send): the rate above which batching
// saves produce requests. With a 5 ms linger, 2,000 a second, measured
// over rate.MinWindow.
const lingerWorth = 10

// Send says that the relay has handed over every transaction it has read.
// Unless transactions come fast enough for a linger (Config.Linger) to
// gather lingerWorth of them, the records produced go now rather than after
// their linger: a linger then batches a busy stream, where it saves produce
// requests and CPU, and delays no record of a quiet one. Called from the
// producing goroutine.
//
// N.B. measured on 2 cores with PostgreSQL and the broker on the same box:
// a plain 5 ms linger at 1,000 single-row transactions a second raised p50
// from 2 ms to 6 ms; at 5,000 a second it cut p99 from 0.7-0.9 s to
// 0.15-0.19 s, the broker's CPU for unbatched requests having saturated the
// box (bench/results/2026-12-01-203951-vm-linger0.md and the three after).
func (s *Sink) Send() {
	if !s.lingering || s.cfg.Linger <= 0 || s.cfg.Null || s.rate.Busy(time.Now()) {
		return
	}
	s.lingering = false
	// N.B. franz-go ends every partition's linger in Flush before it
	// waits, and a context that is done returns at once.
	_ = s.cl.Flush(doneCtx)
}

// doneCtx is a context that is already done.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// sendLingering sends at once the records that wait for their linger
// (Config.Linger) to end, and those produced after them until all are
// acknowledged: the sink calls it before each wait for an acknowledgement,
// which its own lingering records would otherwise prolong by up to the
// linger each time. Called from the producing goroutine.
//
// N.B. it flushes in the background rather than ending the lingers once: a
// record of a topic whose partitions the client has not loaded yet (as
// after a restart) starts its linger only once they are loaded, after any
// call that ends the lingers, and franz-go starts no linger while a Flush
// runs. The flush ends by itself once every record is acknowledged (or
// failed, as when the client is closed).
func (s *Sink) sendLingering() {
	if !s.lingering || s.cfg.Linger <= 0 || s.cfg.Null {
		return
	}
	s.lingering = false
	if s.flushDone != nil {
		select {
		case <-s.flushDone:
		default:
			return // still flushing: nothing lingers
		}
	}
	done := make(chan struct{})
	s.flushDone = done
	go func() {
		defer close(done)
		_ = s.cl.Flush(context.Background())
	}()
}

// sealHandoff ends the open handoff; the next records may reopen it.
func (s *Sink) sealHandoff() {
	if s.h != nil {
		s.clock.seal(s.h)
		s.last, s.h = s.h, nil
	}
}

// produceNull acknowledges the part's events without producing them.
func (s *Sink) produceNull(tx *decode.Tx) error {
	for i := range tx.Events {
		if ev := &tx.Events[i]; ev.Err != nil {
			return fmt.Errorf("%w: table %s, xid %d: %w", ErrPoison, ev.Table, tx.Xid, ev.Err)
		}
	}
	if n := len(tx.Events); n > 0 {
		s.cur.Add(n)
		for range n {
			s.cur.Ack()
		}
	}
	if tx.Last {
		s.cur.Close(tx.EndLSN)
		s.cur = nil
	}
	return nil
}

// poison dead-letters a poison event, or halts.
func (s *Sink) poison(ctx context.Context, tx *decode.Tx, ev *decode.Event, a *txAcks, meta recordMeta) (*txAcks, error) {
	if s.cfg.OnPoison == OnPoisonHalt {
		return a, fmt.Errorf("%w: table %s, xid %d, commit lsn %s, id %q: %w (--on-poison=halt: nothing from this event on is confirmed)",
			ErrPoison, ev.Table, tx.Xid, tx.CommitLSN, ev.ID, ev.Err)
	}
	dl, err := s.deadLetterEvent(tx, ev)
	if err != nil {
		return a, err
	}
	s.log.Warn("poison event: dead-lettered", zap.String("table", ev.Table), zap.Uint32("xid", tx.Xid),
		zap.Stringer("commit_lsn", tx.CommitLSN), zap.ByteString("id", ev.ID), zap.String("topic", s.cfg.DeadLetterTopic), zap.Error(ev.Err))
	s.metrics.DeadLetter(decode.Reason(ev.Err))
	return s.produceDeadLetter(ctx, dl, a, meta)
}

// rejectTooLarge dead-letters a record too large for its topic, or halts.
func (s *Sink) rejectTooLarge(ctx context.Context, tx *decode.Tx, r *kgo.Record, limit int32, a *txAcks, meta recordMeta) (*txAcks, error) {
	return s.rejectRecord(ctx, tx, r, tooLargeErr(r.Topic, loneBatchBytes(r), limit), "record too large for its topic: dead-lettered", a, meta)
}

// rejectRecord dead-letters record r, which cannot go to its topic (why),
// logging msg; or, with --on-poison=halt, fails without confirming past it.
func (s *Sink) rejectRecord(ctx context.Context, tx *decode.Tx, r *kgo.Record, why error, msg string, a *txAcks, meta recordMeta) (*txAcks, error) {
	if s.cfg.OnPoison == OnPoisonHalt {
		return a, fmt.Errorf("%w: xid %d, commit lsn %s: %w (--on-poison=halt: nothing from this event on is confirmed)", ErrPoison, tx.Xid, tx.CommitLSN, why)
	}
	dl, err := s.deadLetterRejected(r, why, meta)
	if err != nil {
		return a, err
	}
	s.log.Warn(msg, zap.String("topic", r.Topic), zap.String("table", meta.table),
		zap.Uint32("xid", tx.Xid), zap.Stringer("commit_lsn", tx.CommitLSN), zap.Error(why))
	s.metrics.DeadLetter(string(dl.Headers[0].Value))
	return s.produceDeadLetter(ctx, dl, a, meta)
}

// produceDeadLetter hands a dead-letter record to the client; its promise
// acknowledges the event.
func (s *Sink) produceDeadLetter(ctx context.Context, dl *kgo.Record, a *txAcks, meta recordMeta) (*txAcks, error) {
	a, err := s.handOver(ctx, dl, a, meta)
	if err != nil {
		return nil, err
	}
	s.cur.Add(1)
	dl.Context = s.held
	s.cl.Produce(ctx, dl, a.deadLettered)
	return a, nil
}

// InflightBytes is what the records produced and not yet finished count
// against MaxInflightBytes.
func (s *Sink) InflightBytes() int64 { return s.budget.Used() }

// partMeta describes a Tx part for dead-letter headers.
func partMeta(tx *decode.Tx) recordMeta {
	table := ""
	for i := range tx.Events {
		switch t := tx.Events[i].Table; {
		case table == "":
			table = t
		case table != t:
			table = "(several)"
		}
	}
	return recordMeta{table: table, commitLSN: tx.CommitLSN, xid: tx.Xid, commitTime: tx.CommitTime}
}

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
	a.s.budget.Release(recordCost(r))
	a.h.pending.Add(-1)
	if err != nil {
		if !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) {
			a.s.metrics.Failure() // not the records a discarded client gives back
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

// ensureTopics checks each topic not yet seen, creating it if allowed. It
// returns the topics the events may not go to and why (screenTopics).
func (s *Sink) ensureTopics(ctx context.Context, events []decode.Event) (map[string]error, error) {
	var missing []string
	for i := range events {
		t := events[i].Topic
		if t == "" || events[i].Err != nil {
			continue
		}
		// N.B. the dead-letter and checkpoint topics are known, and
		// still refused to an event.
		if _, ok := s.known[t]; ok && !s.reserved(t) {
			continue
		}
		dup := false
		for _, m := range missing {
			dup = dup || m == t
		}
		if !dup {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	missing, refused, details, err := s.screenTopics(ctx, missing)
	if err != nil || len(missing) == 0 {
		return refused, err
	}
	s.fresh = true
	return refused, s.ensureListed(ctx, details, missing)
}

// ensureTopic checks topics, creating missing ones if allowed, and reads
// their batch caps.
func (s *Sink) ensureTopic(ctx context.Context, missing ...string) error {
	return s.ensureListed(ctx, nil, missing)
}

// ensureListed is ensureTopic with the topics' details listed already
// (screenTopics), or nil to list them.
func (s *Sink) ensureListed(ctx context.Context, details kadm.TopicDetails, missing []string) error {
	if details == nil {
		var err error
		if details, err = s.adm.ListTopics(ctx, missing...); err != nil {
			return fmt.Errorf("list topics: %w", err)
		}
	}
	var created []string
	for _, t := range missing {
		d, ok := details[t]
		if ok && d.Err == nil {
			s.partitions[t] = int32(len(d.Partitions))
			continue
		}
		if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("describe topic %s: %w", t, d.Err)
		}
		if !s.cfg.CreateTopics {
			return fmt.Errorf("%w: %s (create it, or run with --create-topics)", ErrTopicMissing, t)
		}
		resp, err := s.adm.CreateTopic(ctx, s.cfg.TopicPartitions, s.cfg.TopicReplicationFactor, nil, t)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t, errors.Join(err, errIf(resp.ErrMessage)))
		}
		s.partitions[t] = s.cfg.TopicPartitions
		s.log.Info("created topic", zap.String("topic", t),
			zap.Int32("partitions", s.cfg.TopicPartitions), zap.Int16("replication_factor", resp.ReplicationFactor))
		created = append(created, t)
	}
	if len(created) > 0 {
		if err := s.awaitLeaders(ctx, created); err != nil {
			return err
		}
	}
	for t, limit := range s.describeLimits(ctx, missing, len(created) > 0) {
		if limit < s.cfg.MaxMessageBytes {
			s.log.Info("topic accepts smaller batches than --kafka-max-message-bytes: capping its batches", zap.String("topic", t), zap.Int32("max_message_bytes", limit))
		}
		// N.B. stored before the topic's first record: the client reads
		// the cap when it first meets a partition of the topic.
		s.limits.m.Store(t, limit)
		s.known[t] = limit
	}
	return nil
}

func errIf(msg string) error {
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

// Flush waits until every produced record is acknowledged or failed; in
// exactly-once mode it commits the open Kafka transaction first.
func (s *Sink) Flush(ctx context.Context) error {
	if e := s.eos; e != nil {
		e.mu.Lock()
		var err error
		if e.inPG.Load() {
			err = errors.New("flush: a transaction is half handed over; it is not committed")
		} else {
			err = s.commit(ctx)
		}
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := s.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return s.Err()
}

// Close discards the client. Records not yet acknowledged are failed; call
// Flush first to wait for them.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		if s.eos != nil {
			s.abortOpen()
		}
		s.cl.Close()
		s.hold()
	})
}

// zapLogger adapts zap to franz-go's logger.
type zapLogger struct {
	l *zap.Logger
	// batchFailed, if set, is called with the topic when the client logs
	// that Kafka failed a batch: franz-go does so holding the partition's
	// lock, before it fails the batch's records (Sink.held).
	batchFailed func(topic string)
}

// batchFailedMsg is what franz-go (v1.22) logs, at info, when a batch in a
// produce response finally failed; TestNothingWrittenAfterARejectedBatch
// pins it.
const batchFailedMsg = "batch in a produce request failed"

func (z zapLogger) Level() kgo.LogLevel {
	// franz-go's info lines (connections, metadata) go to debug.
	switch {
	case z.l.Core().Enabled(zap.DebugLevel):
		return kgo.LogLevelDebug
	case z.batchFailed != nil:
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (z zapLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if msg == batchFailedMsg && z.batchFailed != nil {
		topic := ""
		for i := 0; i+1 < len(keyvals); i += 2 {
			if k, _ := keyvals[i].(string); k == "topic" {
				topic, _ = keyvals[i+1].(string)
			}
		}
		z.batchFailed(topic)
	}
	if level >= kgo.LogLevelInfo && (msg == "flushing" || msg == "flushed" || !z.l.Core().Enabled(zap.DebugLevel)) {
		return // N.B. Send and sendLingering flush often
	}
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		k, _ := keyvals[i].(string)
		fields = append(fields, zap.Any(k, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		z.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		z.l.Warn(msg, fields...)
	default:
		z.l.Debug(msg, fields...)
	}
}
