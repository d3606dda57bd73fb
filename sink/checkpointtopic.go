package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// ensureCheckpointTopic checks that the checkpoint topic exists and is
// compacted, creating it (one partition, compacted) if allowed.
func (s *Sink) ensureCheckpointTopic(ctx context.Context) error {
	t := s.cfg.CheckpointTopic
	details, err := s.adm.ListTopics(ctx, t)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		if !s.cfg.CreateTopics {
			return fmt.Errorf("%w: checkpoint topic %s (create it with cleanup.policy=compact, or run with --create-topics)", ErrTopicMissing, t)
		}
		compact := "compact"
		resp, err := s.adm.CreateTopic(ctx, 1, s.cfg.TopicReplicationFactor, map[string]*string{"cleanup.policy": &compact}, t)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t, errors.Join(err, errIf(resp.ErrMessage)))
		}
		s.log.Info("created checkpoint topic", zap.String("topic", t), zap.Int16("replication_factor", resp.ReplicationFactor))
		if err := s.awaitLeaders(ctx, []string{t}); err != nil {
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
	for tt, limit := range s.describeLimits(ctx, []string{t}, true) {
		s.limits.m.Store(tt, limit)
		s.known[tt] = limit
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
