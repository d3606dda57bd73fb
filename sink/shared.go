package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// SharedClient is one Kafka producer client that the sinks of several
// at-least-once pipelines produce through (package fleet makes one per
// distinct SharedKey): one set of broker connections, batches and
// metadata for them all instead of one per pipeline.
//
// The delivery rules hold per sink, as with a client of its own:
//   - a sink confirms only what Kafka acknowledged of its own records:
//     each record's promise is its sink's (produce.go, acks.go);
//   - a sink's Flush waits for its own records only (flushOwn), never for
//     another's, and ending lingers or a failure of one sink never purges
//     another's records: nothing calls the client's Flush to wait,
//     AbortBufferedRecords or Close while it serves;
//   - a failed sink's records are held back (Sink.held: their context is
//     its own) and it restarts from its confirmed position; its next
//     attempt gets a fresh client, as a single walrelay's would: a sink's
//     Kafka failure retires the client it used, which serves its other
//     sinks until they stop and is closed after the last.
//
// N.B. the records of one topic-partition share its batches: a batch the
// broker rejects, or a partition failed for a lasting error, fails every
// buffered record of that partition, whichever sink produced it. Every
// sink that produces to the topic is then told (as its own client would
// tell it: it fails and restarts, nothing lost), so pipelines writing to
// the same topics may fail together; pipelines writing to topics of their
// own never do. Exactly-once sinks never share (a transactional id each).
type SharedClient struct {
	cfg  Config // the settings of the client (withDefaults), SharedKey's
	log  *zap.Logger
	mu   sync.Mutex
	cur  *sharedGen // nil: the next sink makes a client
	made atomic.Int64
}

// SharedKey says which pipelines may share a client: those whose client
// options are equal (brokers, client id, compression, linger, batch cap).
// Exactly-once pipelines have their own.
//
// N.B. not Config.Kafka (TLS and SASL, resolved into options that do not
// compare): the caller shares a client only among pipelines of one
// security (package fleet: it is process-wide), and the client takes the
// first one's.
func SharedKey(c Config) (key string, ok bool) {
	if c.ExactlyOnce {
		return "", false
	}
	c = c.withDefaults()
	return fmt.Sprintf("brokers=%s client-id=%s compression=%s linger=%s max-message-bytes=%d",
		strings.Join(c.Brokers, ","), c.ClientID, c.Compression, c.Linger, c.MaxMessageBytes), true
}

// NewSharedClient returns a shared client of cfg's Kafka settings; it
// connects once a sink uses it.
func NewSharedClient(cfg Config, log *zap.Logger) *SharedClient {
	return &SharedClient{cfg: cfg.withDefaults(), log: log}
}

// Clients is how many Kafka clients it made so far (one, unless sinks
// failed on Kafka errors).
func (c *SharedClient) Clients() int64 { return c.made.Load() }

// Close closes the current client; sinks must have closed first.
func (c *SharedClient) Close() {
	c.mu.Lock()
	g := c.cur
	c.cur = nil
	c.mu.Unlock()
	if g != nil {
		g.retire()
	}
}

// sharedGen is one client of a SharedClient and the sinks using it.
type sharedGen struct {
	c      *SharedClient
	cl     *kgo.Client
	limits *topicLimits
	mu     sync.Mutex
	// members are the sinks using the client; refs counts those joining
	// too, so that a retired client is closed after the last.
	members   map[*Sink]bool
	refs      int
	retired   bool
	closeOnce sync.Once
}

// shares reports whether a sink of cfg produces through c.
func (c *SharedClient) shares(cfg Config, deps Deps) bool {
	return c != nil && !cfg.ExactlyOnce && !deps.Null
}

// acquire returns the current client, made if there is none, counted as
// used until release.
func (c *SharedClient) acquire() (*sharedGen, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		g := &sharedGen{c: c, members: map[*Sink]bool{}, limits: &topicLimits{def: c.cfg.MaxMessageBytes}}
		n := c.made.Add(1)
		opts := []kgo.Opt{
			kgo.SeedBrokers(c.cfg.Brokers...),
			kgo.ClientID(c.cfg.ClientID),
			// N.B. as New's own client: acks from all in-sync replicas,
			// idempotent, retried until a sink's watchdog gives up,
			// Kafka's key hashing, each topic's batch cap.
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.StopProducerOnDataLossDetected(),
			kgo.UnknownTopicRetries(-1),
			kgo.RecordPartitioner(partitioner{kgo.StickyKeyPartitioner(nil)}),
			kgo.ProducerBatchCompression(compressions[c.cfg.Compression]),
			kgo.ProducerBatchMaxBytesFn(g.limits.batchMax),
			// N.B. no byte bound of the client's own: each sink's budget
			// (and the process's, Config.InflightPool) bounds what it
			// buffers, and a bound here would make one sink wait for
			// another's records.
			kgo.MaxBufferedRecords(1 << 30),
			kgo.ProducerLinger(c.cfg.Linger),
			kgo.WithHooks(sharedHook{g}),
		}
		if c.cfg.Compression == "lz4" {
			opts = append(opts, kgo.WithCompressor(newLz4Compressor()))
		}
		opts = append(opts, c.cfg.Kafka.Opts()...)
		// N.B. last: the logger tells the sinks of a failing partition
		// before the client fails its records (Sink.held).
		opts = append(opts, kgo.WithLogger(zapLogger{l: c.log.Named("kgo").With(zap.Int64("kafka_client", n)), batchFailed: g.failed}))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("kafka client: %w", err)
		}
		g.cl = cl
		c.cur = g
		c.log.Info("kafka client shared by the pipelines of these settings", zap.Int64("kafka_client", n))
	}
	g := c.cur
	g.mu.Lock()
	g.refs++
	g.mu.Unlock()
	return g, nil
}

// bind counts s among the client's sinks.
func (g *sharedGen) bind(s *Sink) {
	g.mu.Lock()
	g.members[s] = true
	g.mu.Unlock()
}

// sharedCloseWait bounds how long a closing sink waits for its records
// still in the shared client (release).
const sharedCloseWait = 5 * time.Second

// release takes a closing sink off the client. Its records the client
// has not sent fail at once (s.held is cancelled), but an idempotent
// producer cannot fail those already in a produce request: the client
// retries them until the broker answers. Left behind, they could reach
// Kafka after what the pipeline's next attempt (or the replica that
// takes its slot over) sends again, and a record failed by its
// cancelled context fails every record buffered after it in its
// partition, the next attempt's too (TestFleetGroupFaults found both:
// an event three times, the new attempt restarted by the old one's
// records). So the sink waits for its own records to be acknowledged or
// failed, at most sharedCloseWait; if some are still in the client then,
// the client is closed as a client of its own would be: its other sinks'
// records fail and those pipelines restart from their confirmed
// positions, as after a Kafka failure, and nothing of this sink's is
// retried later.
func (g *sharedGen) release(s *Sink) {
	s.hold()
	t := time.NewTimer(sharedCloseWait)
	defer t.Stop()
	select {
	case <-s.budget.Drained():
		g.leave(s, false)
	case <-t.C:
		s.log.Warn("closing the kafka client shared with other pipelines: records of this pipeline are still in a produce request, and must not reach kafka after its next attempt's; the other pipelines on it restart from their confirmed positions",
			zap.Int64("inflight_bytes", s.budget.Used()))
		g.leave(s, true)
	}
}

// leave takes s off the client; closeNow closes the client at once
// (release). A sink that failed on Kafka retires the
// client: its next attempt gets a new one, as a client of its own would
// be discarded, in case what failed was the client's (its producer id,
// a partition it gave up on).
func (g *sharedGen) leave(s *Sink, closeNow bool) {
	if err := s.Err(); closeNow || err != nil && !errors.Is(err, context.Canceled) {
		g.c.mu.Lock()
		if g.c.cur == g {
			g.c.cur = nil
			g.c.log.Info("kafka client retired after a pipeline's kafka failure: the pipelines still on it go on, its next attempt gets a new client", zap.Error(err))
		}
		g.c.mu.Unlock()
		g.mu.Lock()
		g.retired = true
		g.mu.Unlock()
	}
	g.mu.Lock()
	delete(g.members, s)
	g.refs--
	closeNow = closeNow || g.retired && g.refs == 0
	g.mu.Unlock()
	if closeNow {
		g.close()
	}
}

// close closes the client once.
func (g *sharedGen) close() { g.closeOnce.Do(g.cl.Close) }

// retire closes the client once no sink uses it.
func (g *sharedGen) retire() {
	g.mu.Lock()
	g.retired = true
	closeNow := g.refs == 0
	g.mu.Unlock()
	if closeNow {
		g.close()
	}
}

// failed tells the sinks that produce to topic ("": every sink) that the
// client fails records of it (zapLogger's batchFailed). For canceledScope
// (the first records of some partitions had their context ended: a held
// sink's, as a closing pipeline's are) only the held sinks' partitions
// fail: a sink is told only when it shares a topic with a held sink, whose
// records may lead its own in a batch. Before, every sink was held, and
// one pipeline's stop restarted the others (TestFleetPipelineDownOthersGoOn
// on PostgreSQL 18: "orders: not streaming: restarting after: produce to
// topic ...: context canceled" when billing's database went down).
func (g *sharedGen) failed(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if topic == canceledScope {
		var held []*Sink
		for s := range g.members {
			if s.held.Err() != nil {
				held = append(held, s)
			}
		}
		for s := range g.members {
			if s.held.Err() == nil && slices.ContainsFunc(held, s.sharesTopicWith) {
				s.batchFailed(topic)
			}
		}
		return
	}
	for s := range g.members {
		if topic == "" || s.producesTo(topic) {
			s.batchFailed(topic)
		}
	}
}

// sharesTopicWith says whether s and o have checked a topic in common.
func (s *Sink) sharesTopicWith(o *Sink) bool {
	shared := false
	o.topics.Range(func(k, _ any) bool {
		t, _ := k.(string)
		shared = s.producesTo(t)
		return !shared
	})
	return shared
}

// sinkKey is the key of a sink's records' Context value: the sink.
type sinkKey struct{}

// sinkRef is the value: set once the sink is made.
type sinkRef struct{ s atomic.Pointer[Sink] }

// sharedHook is kafkaHook for a shared client: a record's failure is its
// sink's, a failed produce request every sink's.
type sharedHook struct{ g *sharedGen }

func (h sharedHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	if ref, ok := r.Context.Value(sinkKey{}).(*sinkRef); ok && ref.s.Load() != nil {
		ref.s.Load().batchFailed(r.Topic)
		return
	}
	h.g.failed(r.Topic)
}

func (h sharedHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 0 || e2e.Err() == nil {
		return
	}
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	for s := range h.g.members {
		s.metrics.KafkaError()
	}
}

// producesTo says whether the sink has checked topic for its records.
func (s *Sink) producesTo(topic string) bool {
	_, ok := s.topics.Load(topic)
	return ok
}

// flushOwn waits until every record the sink produced is acknowledged or
// failed, sending what lingers meanwhile: the client's Flush, which ends
// every linger and starts none while it runs, runs only as long as this
// wait, and waits for no other sink's records.
func (s *Sink) flushOwn(ctx context.Context) error {
	drained := s.budget.Drained()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = s.cl.Flush(fctx) }()
	select {
	case <-drained:
		return nil
	case <-s.failed:
		return s.err
	case <-s.closing:
		return kgo.ErrClientClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}
