package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// States of the relay, exported as walrelay_state{state="..."} = 1.
const (
	StateStarting   = "starting"
	StateWaiting    = "waiting_for_slot"
	StateStreaming  = "streaming"
	StateRestarting = "restarting"
	StateStopping   = "stopping"
)

var states = []string{StateStarting, StateWaiting, StateStreaming, StateRestarting, StateStopping}

// WALStatuses are the values of pg_replication_slots.wal_status.
var WALStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// Metrics are walrelay's metrics.
type Metrics struct {
	parked   *parkedGauges // --on-poison=park (parked.go)
	Registry *prometheus.Registry

	published        *prometheus.CounterVec
	publishedByTopic sync.Map // topic → prometheus.Counter
	topicSeries      int      // entries in publishedByTopic; under mu
	publishedOther   prometheus.Counter
	DeadLettered     *prometheus.CounterVec
	Ignored          prometheus.Counter
	OtherTables      prometheus.Counter
	MessagesNonTx    prometheus.Counter
	Transactions     prometheus.Counter
	ProduceFailures  prometheus.Counter
	KafkaErrors      prometheus.Counter
	Restamps         prometheus.Counter
	CommitToAck      prometheus.Histogram
	KafkaAck         prometheus.Histogram
	ConfirmLag       prometheus.Histogram
	Restarts         *prometheus.CounterVec
	SlotLagBytes     prometheus.Gauge
	SlotSafeWALSize  prometheus.Gauge
	slotWALStatus    *prometheus.GaugeVec
	state            *prometheus.GaugeVec
	TraceContexts    *prometheus.CounterVec // trace.go
	TraceFlushes     *prometheus.CounterVec // trace.go
	TraceSpans       *prometheus.CounterVec // trace.go

	// Exactly-once mode (--exactly-once).
	kafkaTxns          *prometheus.CounterVec
	SkippedTxns        prometheus.Counter
	CheckpointLSN      prometheus.Gauge
	CheckpointLagBytes prometheus.Gauge

	failover failoverGauges

	mu      sync.Mutex
	current string
}

// New registers every metric on a new registry, with Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_events_published_total", Help: "Outbox events acknowledged by Kafka, by topic.",
		}, []string{"topic"}),
		DeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_events_dead_lettered_total", Help: "Outbox events written to the dead-letter topic, by reason.",
		}, []string{"reason"}),
		Ignored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_changes_ignored_total", Help: "Updates, deletes and truncates of outbox tables, which are never published.",
		}),
		OtherTables: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_changes_other_tables_total", Help: "Changes of tables that are not outboxes, decoded and dropped: above 0, the publication sends more than the outbox (FOR ALL TABLES, or other tables listed).",
		}),
		MessagesNonTx: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_messages_nontransactional_total", Help: "Non-transactional logical decoding messages with the outbox prefix (--source messages): never published, since they survive a rollback; above 0, an application emits events with pg_logical_emit_message(false, ...).",
		}),
		Transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_transactions_total", Help: "Committed transactions decoded.",
		}),
		ProduceFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_produce_failures_total", Help: "Records that finally failed after the client's retries; each one restarts streaming from the confirmed position.",
		}),
		KafkaErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_kafka_produce_request_errors_total", Help: "Produce requests that failed and were retried by the Kafka client.",
		}),
		Restamps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_records_restamped_total", Help: "Records stamped with the time they were handed to Kafka instead of their commit time, which was outside their topic's message.timestamp.before.max.ms or after.max.ms (header walrelay.commit.time keeps it).",
		}),
		CommitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "walrelay_commit_to_ack_seconds",
			Help:    "Time from a transaction's commit in PostgreSQL to Kafka's acknowledgement of each of its records.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		KafkaAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "walrelay_kafka_ack_seconds",
			Help:    "Time from handing a transaction's records to the Kafka client to Kafka's acknowledgement of each: the Kafka part of walrelay_commit_to_ack_seconds (the rest is PostgreSQL's streaming and walrelay's decoding).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		ConfirmLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "walrelay_confirm_lag_seconds",
			Help:    "Time from Kafka's acknowledgement of a transaction (the oldest one a status update confirms) to the status update that confirms it to PostgreSQL: what a crash would send again. Includes the wait for the publication check.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .15, .2, .3, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_restarts_total", Help: "Pipeline restarts from the last confirmed position, by cause (postgres, kafka, other).",
		}, []string{"cause"}),
		SlotLagBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_slot_lag_bytes", Help: "pg_current_wal_lsn() - confirmed_flush_lsn of the slot, polled.",
		}),
		SlotSafeWALSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_slot_safe_wal_size_bytes", Help: "pg_replication_slots.safe_wal_size: WAL that can still be written before the slot is lost (NaN when unlimited).",
		}),
		slotWALStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_wal_status", Help: "1 for the slot's current pg_replication_slots.wal_status.",
		}, []string{"status"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_state", Help: "1 for the relay's current state.",
		}, []string{"state"}),
		kafkaTxns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_kafka_transactions_total", Help: "Kafka transactions ended in --exactly-once mode, by outcome (committed, aborted).",
		}, []string{"outcome"}),
		SkippedTxns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_transactions_skipped_total", Help: "PostgreSQL transactions not produced again in --exactly-once mode: a committed checkpoint already covers them.",
		}),
		CheckpointLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_checkpoint_lsn", Help: "End LSN in the last committed checkpoint record (--exactly-once).",
		}),
		CheckpointLagBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_checkpoint_lag_bytes", Help: "WAL between the newest transaction handed to Kafka and the last committed checkpoint (--exactly-once): what an open Kafka transaction holds.",
		}),
	}
	m.TraceContexts = newTraceContexts(m.Registry)
	m.TraceFlushes = newTraceFlushes(m.Registry)
	m.TraceSpans = newTraceSpans(m.Registry)
	m.Registry.MustRegister(m.kafkaTxns, m.SkippedTxns, m.CheckpointLSN, m.CheckpointLagBytes)
	m.parked = newParked(m.Registry)
	m.kafkaTxns.WithLabelValues("committed")
	m.kafkaTxns.WithLabelValues("aborted")
	m.Registry.MustRegister(m.published, m.DeadLettered, m.Ignored, m.OtherTables, m.MessagesNonTx, m.Transactions, m.ProduceFailures,
		m.KafkaErrors, m.Restamps, m.CommitToAck, m.KafkaAck, m.ConfirmLag, m.Restarts, m.SlotLagBytes, m.SlotSafeWALSize, m.slotWALStatus, m.state,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range []string{"postgres", "kafka", "other"} {
		m.Restarts.WithLabelValues(c)
	}
	// Every reason shows from the start, so that alerts on increase() see
	// the first dead letter.
	for _, r := range []string{"null_key", "empty_key", "null_id", "invalid_topic", "missing_column",
		"unsupported_type", "bad_value", "too_large", "rejected_by_broker", "topic_not_allowed", "topic_limit", "parked", "other"} {
		m.DeadLettered.WithLabelValues(r)
	}
	for _, s := range states {
		m.state.WithLabelValues(s)
	}
	m.SetState(StateStarting)
	return m
}

// MaxTopicSeries bounds the topic label values of
// walrelay_events_published_total: the records of the topics met after
// the first MaxTopicSeries are counted under topic=OtherTopic, so that
// topics named by row data cannot grow the series without bound.
const MaxTopicSeries = 100

// OtherTopic is the topic label of the records of the topics past
// MaxTopicSeries; parentheses are not allowed in a Kafka topic name, so it
// never is one.
const OtherTopic = "(other)"

// Published counts one record acknowledged on topic, of a transaction
// committed at commit and handed to the Kafka client at handed. Safe for
// concurrent use.
func (m *Metrics) Published(topic string, commit, handed time.Time) {
	if m == nil {
		return
	}
	c, ok := m.publishedByTopic.Load(topic)
	if !ok {
		c = m.topicCounter(topic)
	}
	c.(prometheus.Counter).Inc()
	now := time.Now()
	m.CommitToAck.Observe(now.Sub(commit).Seconds())
	m.KafkaAck.Observe(now.Sub(handed).Seconds())
}

// ConfirmedAfter records the confirmation lag of one status update.
func (m *Metrics) ConfirmedAfter(lag time.Duration) {
	if m == nil {
		return
	}
	m.ConfirmLag.Observe(lag.Seconds())
}

// topicCounter is the counter of a topic not yet in publishedByTopic: its
// own while fewer than MaxTopicSeries topics have one, else OtherTopic's.
func (m *Metrics) topicCounter(topic string) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.publishedByTopic.Load(topic); ok {
		return c.(prometheus.Counter)
	}
	// N.B. a topic past the cap is not stored: the map stays bounded too.
	if m.topicSeries >= MaxTopicSeries {
		if m.publishedOther == nil {
			m.publishedOther = m.published.WithLabelValues(OtherTopic)
		}
		return m.publishedOther
	}
	c := m.published.WithLabelValues(topic)
	m.publishedByTopic.Store(topic, c)
	m.topicSeries++
	return c
}

// DeadLetter counts one dead-lettered event.
func (m *Metrics) DeadLetter(reason string) {
	if m != nil {
		m.DeadLettered.WithLabelValues(reason).Inc()
	}
}

// Failure counts one record that finally failed.
func (m *Metrics) Failure() {
	if m != nil {
		m.ProduceFailures.Inc()
	}
}

// KafkaError counts one failed produce request.
func (m *Metrics) KafkaError() {
	if m != nil {
		m.KafkaErrors.Inc()
	}
}

// Restamped counts one record stamped with the current time instead of
// its commit time.
func (m *Metrics) Restamped() {
	if m != nil {
		m.Restamps.Inc()
	}
}

// SetBuildInfo exports walrelay_build_info{version, goversion} = 1.
func (m *Metrics) SetBuildInfo(version, goVersion string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "walrelay_build_info", Help: "1, labelled with walrelay's version and the Go version that built it.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(version, goVersion).Set(1)
	m.Registry.MustRegister(g)
}

// SetState makes state the current one.
func (m *Metrics) SetState(state string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.current = state
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(s).Set(v)
	}
}

// State is the current state.
func (m *Metrics) State() string {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current
}

// SetWALStatus records the slot's wal_status.
func (m *Metrics) SetWALStatus(status string) {
	if m == nil {
		return
	}
	for _, s := range WALStatuses {
		v := 0.0
		if s == status {
			v = 1
		}
		m.slotWALStatus.WithLabelValues(s).Set(v)
	}
}

// KafkaTransaction counts one Kafka transaction ended with outcome
// (committed or aborted).
func (m *Metrics) KafkaTransaction(outcome string) {
	if m != nil {
		m.kafkaTxns.WithLabelValues(outcome).Inc()
	}
}

// Skipped counts one transaction a checkpoint already covered.
func (m *Metrics) Skipped() {
	if m != nil {
		m.SkippedTxns.Inc()
	}
}

// Checkpoint sets the last committed checkpoint and what lies past it.
func (m *Metrics) Checkpoint(lsn, handed uint64) {
	if m != nil {
		m.CheckpointLSN.Set(float64(lsn))
		m.CheckpointLagBytes.Set(float64(handed - min(handed, lsn)))
	}
}
