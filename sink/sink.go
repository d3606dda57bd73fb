package sink

import (
	"context"
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
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/internal/budget"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/rate"
	"github.com/walrelay/walrelay/kafkastate"
)

// Sink produces events. Produce is called from one goroutine.
type Sink struct {
	cfg     Config
	deps    Deps // Opts with the Kafka connection's first (baseOpts)
	log     *zap.Logger
	cl      *kgo.Client
	adm     *kadm.Client
	tracker *checkpoint.Tracker // the acknowledgement tracker, whose watermark the stream confirms
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
	cur        *checkpoint.Tx   // the transaction being produced, in the tracker
	h, last    *handoff         // the open handoff; the last one sealed
	hn         int              // records in h (or last)
	handoffAge time.Duration
	isoThrough pglogrepl.LSN                   // isolating the transactions up to this commit LSN
	isoTopics  atomic.Pointer[map[string]bool] // of these topics; nil when not isolating (read by batchFailed too)
	fresh      bool                            // the part being produced has a topic's first records
	lingering  bool                            // records were produced since the last send
	rate       rate.Meter                      // transaction parts produced, for Send
	// now is the part's time, read once per part (Produce) and again
	// after a wait for room: it times the tracker's transaction, the
	// handoff and the records' stamps (N.B. a clock reading costs about
	// 25 ns here; per reading of each, they were 9 of a single-row
	// transaction's 21, replication/clock.go).
	now       time.Time
	flushDone chan struct{} // closed when sendLingering's flush has ended

	iso *Isolation
	// Stamping with the current time after Kafka rejected timestamps
	// (Isolation.stampNow): the transactions up to stampThrough of
	// stampTopics (nil: none). Used by the producing goroutine only.
	stampThrough pglogrepl.LSN
	stampTopics  map[string]bool
	eventStamped sync.Map // topics given an event's own timestamp: topic → true
	stampMu      sync.Mutex
	stampAsked   map[string]error // timestampRetry's decision per topic, under stampMu
	lastCommit   atomic.Uint64    // commit LSN of the newest transaction begun
	delivery     delivery         // atLeastOnce, or exactlyOnce with ExactlyOnce
	parks        *parkSet         // --on-poison=park: the parked aggregates (park.go); nil otherwise
	evIndex      uint32           // the part's first event's index in its transaction (producing goroutine)
	curEv        *decode.Event    // the event being delivered, and its position (producing goroutine)
	curPos       kafkastate.Pos

	// undecided says what the exactly-once checkpoint read waits for
	// (checkpointtopic.go); nil when it does not wait.
	undecided atomic.Pointer[string]

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

	// sh is the shared client the sink produces through (shared.go), nil
	// when it has its own; topics are those it checked (topic → true).
	sh     *sharedGen
	topics sync.Map
}

// New builds a client; it does not connect until Ping or Produce.
func New(cfg Config, deps Deps, log *zap.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Null && cfg.ExactlyOnce {
		return nil, ErrNullExactlyOnce
	}
	cfg = cfg.WithSlot(deps.Source.Slot).withDefaults()
	log = log.Named("sink")
	limits := &topicLimits{def: cfg.MaxMessageBytes}
	held, hold := context.WithCancel(context.Background())
	ref := &sinkRef{}
	held = context.WithValue(held, sinkKey{}, ref) // shared.go
	var s *Sink
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
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
		kgo.WithHooks(kafkaHook{m: deps.Metrics, failed: func(topic string) { s.batchFailed(topic) }}),
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
	// N.B. TLS and SASL first in Opts, which every client of the sink
	// takes (baseOpts).
	deps.Opts = append(cfg.Kafka.Opts(), deps.Opts...)
	// N.B. the logger holds back every record once Kafka has failed
	// a batch (see held): last, so that no option replaces it.
	opts = append(opts, deps.Opts...)
	opts = append(opts, kgo.WithLogger(zapLogger{l: log.Named("kgo"), batchFailed: func(topic string) { s.batchFailed(topic) }}))
	var sh *sharedGen
	var cl *kgo.Client
	var err error
	if cfg.Shared.shares(cfg, deps) {
		// N.B. the fleet's client of these settings (shared.go).
		if sh, err = cfg.Shared.acquire(); err == nil {
			cl, limits = sh.cl, sh.limits
		}
	} else {
		cl, err = kgo.NewClient(opts...)
	}
	if err != nil {
		hold()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	s = &Sink{
		cfg:        cfg,
		deps:       deps,
		log:        log,
		cl:         cl,
		adm:        kadm.NewClient(cl),
		tracker:    deps.Tracker,
		metrics:    deps.Metrics,
		known:      make(map[string]int32),
		partitions: make(map[string]int32),
		failed:     make(chan struct{}),
		held:       held,
		hold:       hold,
		closing:    make(chan struct{}),
		budget:     budget.NewIn(int64(cfg.MaxInflightBytes), cfg.InflightPool),
		sh:         sh,
		limits:     limits,
		handoffAge: cfg.DeliveryTimeout / 16,
		rate:       rate.PerWait(lingerWorth, cfg.Linger),
		iso:        deps.Isolation,
		created:    deps.CreatedTopics,
	}
	s.allow, _ = compileTopicAllow(cfg.TopicAllow) // checked by Validate
	if s.created == nil {
		s.created = NewCreatedTopics()
	}
	if s.iso == nil {
		s.iso = NewIsolation()
	}
	s.delivery = atLeastOnce{}
	if cfg.ExactlyOnce {
		s.delivery = newExactlyOnce(s)
	}
	if through, topics := s.iso.snapshot(); topics != nil {
		s.isoThrough = through
		s.isoTopics.Store(&topics)
		log.Warn("kafka rejected a record batch: producing the records of its topics one at a time, to find the record at fault",
			zap.Strings("topics", slices.Sorted(maps.Keys(topics))), zap.Stringer("through_commit_lsn", through))
	}
	s.stampThrough, s.stampTopics = s.iso.stamping()
	ref.s.Store(s)
	if sh != nil {
		sh.bind(s)
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
	if s.deps.Null {
		return nil
	}
	if err := s.cl.Ping(ctx); err != nil {
		return fmt.Errorf("reach kafka at %s: %w", strings.Join(s.cfg.Brokers, ","), err)
	}
	if s.cfg.OnPoison == OnPoisonDeadLetter || s.parking() {
		if err := s.ensureTopic(ctx, s.cfg.DeadLetterTopic); err != nil {
			return err
		}
	}
	// N.B. with --exactly-once the parked aggregates are read once the
	// producer fenced its older ones (exactlyOnce.init): their park
	// records may be in a transaction left open, which only the fencing
	// decides.
	if s.parking() && !s.cfg.ExactlyOnce {
		if err := s.startParking(ctx); err != nil {
			return err
		}
	}
	return s.delivery.start(ctx)
}

// Ping checks that a broker answers.
func (s *Sink) Ping(ctx context.Context) error {
	if s.deps.Null {
		return nil
	}
	return s.cl.Ping(ctx)
}

type kafkaHook struct {
	m      *metrics.Metrics
	failed func(topic string) // Sink.batchFailed
}

// OnProduceRecordUnbuffered holds back every record once one failed, on
// any path (failedLines lists those franz-go logs first, holding the
// partition's lock): it runs just before the record's promise.
func (h kafkaHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil && h.failed != nil {
		h.failed(r.Topic)
	}
}

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

// HoldsSlot tells the sink that the replication stream holds the slot: in
// exactly-once mode it then fences the older producers of its
// transactional id and reads the checkpoint, without waiting for the
// first transaction. Safe to call from any goroutine, more than once.
func (s *Sink) HoldsSlot() { s.delivery.holdsSlot() }

// Waiting says what holds the sink back before it can deliver (the
// exactly-once checkpoint read waiting for undecided Kafka transactions),
// or "" when nothing does.
func (s *Sink) Waiting() string {
	if w := s.undecided.Load(); w != nil {
		return *w
	}
	return ""
}

// InflightBytes is what the records produced and not yet finished count
// against MaxInflightBytes.
func (s *Sink) InflightBytes() int64 { return s.budget.Used() }

// Flush waits until every produced record is acknowledged or failed; in
// exactly-once mode it commits the open Kafka transaction first.
func (s *Sink) Flush(ctx context.Context) error {
	if err := s.delivery.flush(ctx); err != nil {
		return err
	}
	if s.sh != nil {
		if err := s.flushOwn(ctx); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		return s.Err()
	}
	if err := s.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return s.Err()
}

// ErrAborted fails a sink the relay aborts (Abort). It is a
// context.Canceled: an abort ends a stop that was asked for, and the
// records it gave up on were never acknowledged, so never confirmed.
var ErrAborted error = abortedError{}

type abortedError struct{}

func (abortedError) Error() string {
	return "aborted: unacknowledged records are sent again on restart"
}

func (abortedError) Is(target error) bool { return target == context.Canceled }

// Abort fails the sink at once: a flush or commit waiting for Kafka gives
// up, Produce returns the error, and nothing more is acknowledged for
// confirmation. Safe to call from any goroutine, more than once.
func (s *Sink) Abort() { s.fail(ErrAborted) }

// Close discards the client. Records not yet acknowledged are failed; call
// Flush first to wait for them.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.delivery.close()
		if s.sh != nil {
			// N.B. the shared client is closed only when this sink's
			// records would outlive it (shared.go, release).
			s.sh.release(s)
		} else {
			s.cl.Close()
		}
		s.hold()
	})
}
