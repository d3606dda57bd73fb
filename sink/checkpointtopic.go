package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/kafkaconn"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
)

// Exactly-once's checkpoint topic: ensured at Start, and the last
// checkpoint of the slot read once the stream holds the slot (init).

// ensureCheckpointTopic checks that the checkpoint topic exists and is
// compacted, creating it (one partition, compacted) if allowed, unless
// the relay's marker store did (Deps.CheckpointTopicReady); then it reads
// the topic's limits.
func (s *Sink) ensureCheckpointTopic(ctx context.Context) error {
	t := s.cfg.CheckpointTopic
	if s.deps.CheckpointTopicReady {
		// N.B. the marker store checked it, on the same topic: once.
		return s.checkpointLimits(ctx)
	}
	details, err := s.adm.ListTopics(ctx, t)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		if !s.cfg.CreateTopics {
			return fmt.Errorf("%w: checkpoint topic %s (create it with cleanup.policy=compact, or run with --create-topics)", ErrTopicMissing, t)
		}
		compact := "compact"
		created, err := kafkaconn.CreateTopics(ctx, s.cl, s.log, s.cfg.DeliveryTimeout,
			kafkaconn.Topic{Name: t, Partitions: 1, ReplicationFactor: s.cfg.TopicReplicationFactor, Configs: map[string]*string{"cleanup.policy": &compact}})
		for _, c := range created {
			s.log.Info("created checkpoint topic", zap.String("topic", t), zap.Int16("replication_factor", c.ReplicationFactor))
		}
		if err != nil {
			return err
		}
	} else if d.Err != nil {
		return fmt.Errorf("describe topic %s: %w", t, d.Err)
	}
	policy, err := s.cleanupPolicy(ctx, t)
	if err != nil {
		return err
	}
	// N.B. a deleting topic would drop the checkpoint after retention.ms,
	// and the next start would produce again what it covered.
	if !strings.Contains(policy, "compact") {
		return fmt.Errorf("%w: checkpoint topic %s has cleanup.policy=%s: set it to compact (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact), or name another with --checkpoint-topic",
			ErrExactlyOnceSetup, t, policy, t)
	}
	return s.checkpointLimits(ctx)
}

// checkpointLimits reads the checkpoint topic's limits.
func (s *Sink) checkpointLimits(ctx context.Context) error {
	for t, c := range s.describeLimits(ctx, []string{s.cfg.CheckpointTopic}, true) {
		s.storeLimits(t, c)
	}
	return nil
}

// cleanupPolicy reads topic's cleanup.policy.
func (s *Sink) cleanupPolicy(ctx context.Context, topic string) (string, error) {
	var last error
	for try := 0; try < 20; try++ {
		rcs, err := s.adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			for _, rc := range rcs {
				if rc.Err != nil {
					err = rc.Err
					continue
				}
				for _, c := range rc.Configs {
					if c.Key == "cleanup.policy" && c.Value != nil {
						return *c.Value, nil
					}
				}
				return "delete", nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("describe configs of topic %s: %w", topic, last)
}

// init fences every older producer of the transactional id and reads
// the checkpoint, once; called with e.mu held, while the stream holds
// the slot.
func (e *exactlyOnce) init(ctx context.Context) error {
	s := e.s
	if e.ready {
		return nil
	}
	// N.B. the producer id first: InitProducerID fences every older
	// producer of this transactional id and completes or aborts its open
	// transaction, so that no commit can land after the checkpoint is read.
	if _, _, err := s.cl.ProducerID(ctx); err != nil {
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return fmt.Errorf("%w: init producer id: %w: lower --kafka-transaction-timeout (%s) to at most the broker's transaction.max.timeout.ms, or raise that", ErrExactlyOnceSetup, err, s.cfg.TransactionTimeout)
		}
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.UnsupportedVersion) {
			return fmt.Errorf("%w: init producer id for transactional id %q: %w (grant WRITE and DESCRIBE on the transactional id, on Kafka 0.11 or later)", ErrExactlyOnceSetup, s.cfg.TransactionalID, err)
		}
		return fmt.Errorf("init producer id for transactional id %q: %w", s.cfg.TransactionalID, err)
	}
	end, last, err := kafkastate.ReadCheckpoint(ctx, s.adm, s.baseOpts(), s.cfg.CheckpointTopic, s.deps.Source, s.waitUndecided)
	if err != nil {
		return err
	}
	cp, tli := end, int32(0)
	if last != nil {
		tli = last.Timeline
		cp = s.checkpointBound(end, tli)
	}
	if s.parking() {
		// N.B. before the first event is admitted: Produce begins (and
		// so initialises) before it admits.
		if err := s.startParking(ctx); err != nil {
			return err
		}
	}
	e.checkpoint = cp
	e.ready = true
	s.metrics.Checkpoint(uint64(cp), uint64(cp))
	s.log.Info("exactly-once: checkpoint read; transactions ending at or before it are not produced again",
		zap.String("transactional_id", s.cfg.TransactionalID), zap.String("topic", s.cfg.CheckpointTopic),
		zap.String("key", kafkastate.CheckpointKey(s.deps.Source)), zap.Stringer("end_lsn", end), zap.Int32("checkpoint_timeline", tli),
		zap.Int32("timeline", s.deps.Source.Timeline), zap.Stringer("skip_bound", cp))
	return nil
}

// baseOpts connect a client of its own to the sink's brokers.
func (s *Sink) baseOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(s.cfg.ClientID),
		kgo.WithLogger(zapLogger{l: s.log.Named("kgo")}),
	}, s.deps.Opts...)
}

// waitUndecided is told what the read of the checkpoint topic (the
// exactly-once checkpoint, the parked aggregates) waits for (undecided, ""
// once it no longer waits): a Kafka transaction on the topic not yet
// decided holds back the last stable offset, and a record this pipeline
// committed after it began would not be read. It shows in the log,
// walrelay_checkpoint_read_waiting and, once the pipeline streams,
// Waiting (/readyz; before, /readyz says it is starting).
func (s *Sink) waitUndecided(undecided string) {
	was := s.undecided.Load() != nil
	switch {
	case undecided != "" && !was:
		reason := fmt.Sprintf("waiting for kafka transactions on checkpoint topic %s to be decided before reading the slot's checkpoint or parked aggregates from it (%s)", s.cfg.CheckpointTopic, undecided)
		s.undecided.Store(&reason)
		s.metrics.SetCheckpointWaiting(true)
		s.log.Warn(reason+": another pipeline's transaction ends within its --kafka-transaction-timeout; a producer that stopped inside one holds it until the broker aborts it at that timeout",
			zap.String("topic", s.cfg.CheckpointTopic), zap.String("undecided", undecided))
	case undecided == "" && was:
		s.undecided.Store(nil)
		s.metrics.SetCheckpointWaiting(false)
		s.log.Info("the kafka transactions on the checkpoint topic are decided; reading it", zap.String("topic", s.cfg.CheckpointTopic))
	}
}
