package kafkastate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// DefaultTopic is Config.Topic's default (flag --checkpoint-topic).
const DefaultTopic = "walrelay.checkpoints"

// Config says where the markers are kept.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Kafka is how the marker clients reach Kafka: TLS and SASL
	// (kafkaconn.Security.Resolve). Default zero: plaintext, no SASL.
	Kafka kafkaconn.Conn
	// Opts are extra client options (tests' hooks), applied last.
	Opts []kgo.Opt
	// Topic is the compacted topic of the markers. Default DefaultTopic.
	Topic string
	// CreateTopic creates a missing topic with cleanup.policy=compact;
	// without it a missing topic is an error wrapping ErrSetup.
	CreateTopic bool
	// ReplicationFactor of a created topic; -1: the broker's default.
	ReplicationFactor int16
	// Version is walrelay's version, written into each marker.
	Version string
}

// ErrSetup is wrapped when the topic is missing (and may not be created) or
// not compacted: a person must fix it.
var ErrSetup = errors.New("checkpoint topic setup")

// Marker is one slot's record.
type Marker struct {
	Slot             string    `json:"slot"`
	Database         string    `json:"database"`
	SystemIdentifier string    `json:"system_identifier"`
	ConfirmedLSN     string    `json:"confirmed_lsn"`
	UpdatedAt        time.Time `json:"updated_at"`
	Version          string    `json:"walrelay_version"`
	// ConfirmedCommitTime is the commit time of a transaction at or before
	// ConfirmedLSN (the newest walrelay knew confirmed when it wrote the
	// marker): every transaction after ConfirmedLSN committed later, which
	// is what recovery selects outbox rows by. Zero: not known (a marker of
	// an older walrelay, or no transaction relayed yet).
	ConfirmedCommitTime time.Time `json:"confirmed_commit_time,omitzero"`
	// Recovery is set while a recovery (package recovery) publishes rows
	// from the outbox table for a slot it created: nothing may stream from
	// the slot until it is cleared. Nil: none is unfinished.
	Recovery *Recovery `json:"recovery,omitempty"`
}

// Recovery is an unfinished recovery: a slot created by it has never been
// streamed from, and a new recovery drops it and starts again.
type Recovery struct {
	// Kind is "recover" (the slot was gone) or "backfill" (a new slot).
	Kind      string    `json:"kind"`
	StartedAt time.Time `json:"started_at"`
}

// ErrRecoveryUnfinished is LastConfirmed's error for a slot whose marker
// says a recovery is unfinished: streaming from the slot would skip the
// rows the recovery had still to publish. It wraps ErrSetup.
var ErrRecoveryUnfinished = fmt.Errorf("%w: recovery unfinished", ErrSetup)

// Key is the record key of a slot's marker.
func Key(system, database, slot string) string {
	return "marker/" + system + "/" + database + "/" + slot
}

// Store reads and writes markers over one Kafka client.
type Store struct {
	cfg Config
	cl  *kgo.Client
	adm *kadm.Client
	log *zap.Logger
	idx index // index.go
}

// Open connects and checks the topic: it exists (or is created) and is
// compacted.
func Open(ctx context.Context, cfg Config, log *zap.Logger) (*Store, error) {
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	// N.B. TLS and SASL first in Opts, which the reader takes too.
	cfg.Opts = append(cfg.Kafka.Opts(), cfg.Opts...)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		// N.B. a marker is written only once Kafka's in-sync replicas
		// all have it: it must outlive a broker failure.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// N.B. Write's records are never canceled (a shared store):
		// this bounds how long one waits for Kafka in the client.
		kgo.RecordDeliveryTimeout(markerDeliveryTimeout),
	}, cfg.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create marker client: %w", err)
	}
	s := &Store{cfg: cfg, cl: cl, adm: kadm.NewClient(cl), log: log.Named("marker")}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("reach kafka at %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	if err := s.ensureTopic(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return s, nil
}

// markerDeliveryTimeout is how long a marker record may wait in the
// client for Kafka's acknowledgement before it fails.
const markerDeliveryTimeout = 2 * time.Minute

// Close closes the client.
func (s *Store) Close() { s.cl.Close() }

// CheckTopic reports whether topic exists and is compacted, or would be
// created (for `walrelay check`): a note when it passes.
func CheckTopic(ctx context.Context, adm *kadm.Client, topic string, create bool) (string, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("list topics: %w", err)
	}
	d, ok := topics[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		if create {
			return "missing: will be created at start with cleanup.policy=compact (--create-topics)", nil
		}
		return "", fmt.Errorf("%w: topic %s does not exist and --create-topics is off: create it with cleanup.policy=compact (kafka-topics.sh --create --topic %s --config cleanup.policy=compact)", ErrSetup, topic, topic)
	case d.Err != nil:
		return "", denied(topic, fmt.Errorf("describe topic %s: %w", topic, d.Err))
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("describe topic %s configs: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", fmt.Errorf("describe topic %s configs: %w", topic, err)
	}
	if rc.Err != nil {
		return "", denied(topic, fmt.Errorf("describe topic %s configs: %w", topic, rc.Err))
	}
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy = c.MaybeValue()
		}
	}
	// N.B. a deleting topic would drop the marker of a slot that has been
	// idle for retention.ms, and a missing slot would be taken for new.
	if !strings.Contains(policy, "compact") {
		return "", fmt.Errorf("%w: topic %s has cleanup.policy=%s: walrelay keeps its slot markers there and needs them for good: run kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact", ErrSetup, topic, policy, topic)
	}
	return fmt.Sprintf("exists, %d partition(s), cleanup.policy=%s", len(d.Partitions), policy), nil
}

// denied wraps err with ErrSetup and the ACLs to grant when Kafka refused
// the request.
func denied(topic string, err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return fmt.Errorf("%w: %w: grant walrelay's principal Describe, DescribeConfigs, Read and Write on topic %s (and Create, with --create-topics)", ErrSetup, err, topic)
	}
	return err
}

func (s *Store) ensureTopic(ctx context.Context) error {
	_, err := CheckTopic(ctx, s.adm, s.cfg.Topic, false)
	if err == nil || !s.cfg.CreateTopic || !errors.Is(err, ErrSetup) {
		return err
	}
	topics, lerr := s.adm.ListTopics(ctx, s.cfg.Topic)
	if lerr != nil {
		return fmt.Errorf("list topics: %w", lerr)
	}
	if d, ok := topics[s.cfg.Topic]; ok && d.Err == nil {
		return err // exists, not compacted
	}
	policy := "compact"
	// N.B. the leader wait: the first marker write would otherwise wait
	// out the client's metadata backoff (5 s) while the leader takes the
	// partition on.
	created, cerr := kafkaconn.CreateTopics(ctx, s.cl, s.log, time.Minute, kafkaconn.Topic{Name: s.cfg.Topic, Partitions: 1,
		ReplicationFactor: s.cfg.ReplicationFactor, Configs: map[string]*string{"cleanup.policy": &policy}})
	for _, c := range created {
		if !c.Existed {
			s.log.Info("created topic", zap.String("topic", s.cfg.Topic), zap.String("cleanup_policy", policy), zap.Int16("replication_factor", c.ReplicationFactor))
		}
	}
	if cerr != nil {
		return cerr
	}
	// N.B. a created topic shows in the metadata of every broker a moment
	// later: wait for it rather than take it for missing.
	for i := 0; ; i++ {
		_, err = CheckTopic(ctx, s.adm, s.cfg.Topic, true)
		if err != nil || i == 50 {
			return err
		}
		topics, lerr := s.adm.ListTopics(ctx, s.cfg.Topic)
		if d, ok := topics[s.cfg.Topic]; lerr == nil && ok && d.Err == nil {
			return nil
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Write stores m and waits for Kafka's acknowledgement, until ctx ends.
func (s *Store) Write(ctx context.Context, m Marker) error {
	if m.UpdatedAt.IsZero() {
		m.UpdatedAt = time.Now().UTC()
	}
	if m.Version == "" {
		m.Version = s.cfg.Version
	}
	v, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode marker: %w", err)
	}
	rec := &kgo.Record{Topic: s.cfg.Topic, Key: []byte(Key(m.SystemIdentifier, m.Database, m.Slot)), Value: v}
	// N.B. not ProduceSync: it waits for a record already sent until
	// Kafka answers, past ctx, and a stop must not wait on an unreachable
	// broker. A record left behind is delivered, failed after
	// markerDeliveryTimeout, or failed when the client closes.
	//
	// N.B. without ctx's cancelation: the client is idempotent, and when
	// the first record waiting in a partition is canceled (while the client
	// loads its producer id, or before its batch is sent) franz-go fails
	// every record buffered for that partition with it. The pipelines of
	// a fleet share one store and the topic's one partition
	// (fleet/markers.go): one pipeline's stop must not fail the others'
	// writes (TestWriteSharedOutlivesAnothersCancelation: "unable to
	// initialize a producer ID due to request failures: context
	// canceled"). In make fleet-group a replica's marker writes timed out
	// for tens of seconds while its relays retried, every second, slots
	// another replica held, each attempt's write canceled.
	acked := make(chan error, 1)
	s.cl.Produce(context.WithoutCancel(ctx), rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err = <-acked:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	return nil
}

// endOffsets lists the topic's end offsets, again after an error Kafka
// calls retriable (LEADER_NOT_AVAILABLE while a topic another instance
// just created elects its leaders), until ctx ends.
func (s *Store) endOffsets(ctx context.Context) (kadm.ListedOffsets, error) {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		ends, err := s.adm.ListEndOffsets(ctx, s.cfg.Topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || !kerr.IsRetriable(err) {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return ends, err
		case <-time.After(delay):
		}
	}
}

// Read returns the last marker of the slot as of the topic's end offsets
// now (catchUp); found is false when there is none (or its last record is
// a tombstone).
func (s *Store) Read(ctx context.Context, system, database, slot string) (m Marker, found bool, err error) {
	key := Key(system, database, slot)
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	if err := s.catchUp(ctx); err != nil {
		return m, false, err
	}
	last, found := s.idx.markers[key]
	if !found {
		return m, false, nil
	}
	if err := json.Unmarshal(last, &m); err != nil {
		return m, false, fmt.Errorf("decode marker %s: %w", key, err)
	}
	return m, true, nil
}

// LSN parses m's confirmed LSN.
func (m Marker) LSN() (pglogrepl.LSN, error) {
	return pglogrepl.ParseLSN(m.ConfirmedLSN)
}

// LastConfirmed is Read as replication.History wants it.
func (s *Store) LastConfirmed(ctx context.Context, system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	m, found, err := s.Read(ctx, system, database, slot)
	if err != nil || !found {
		return 0, time.Time{}, false, err
	}
	return m.lastConfirmed(system, database, slot)
}

// LastConfirmedNow is LastConfirmed: a Store always reads the topic.
func (s *Store) LastConfirmedNow(ctx context.Context, system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	return s.LastConfirmed(ctx, system, database, slot)
}

// lastConfirmed is LastConfirmed's answer for the slot's marker m.
func (m Marker) lastConfirmed(system, database, slot string) (pglogrepl.LSN, time.Time, bool, error) {
	if m.Recovery != nil {
		return 0, time.Time{}, false, fmt.Errorf("%w: a %s of slot %q started at %s did not finish, and the slot has not been streamed from: run `walrelay recover` (or `walrelay run --recover-missing-slot`) to drop it and recover again",
			ErrRecoveryUnfinished, m.Recovery.Kind, slot, m.Recovery.StartedAt.UTC().Format(time.RFC3339))
	}
	lsn, err := m.LSN()
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("marker %s: %w", Key(system, database, slot), err)
	}
	return lsn, m.UpdatedAt, true, nil
}
