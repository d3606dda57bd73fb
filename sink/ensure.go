package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/walrelay/walrelay/internal/kafkaconn"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
)

// ErrTopicMissing is wrapped when a topic does not exist and CreateTopics is off.
var ErrTopicMissing = errors.New("topic does not exist")

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
	var create []kafkaconn.Topic
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
		create = append(create, kafkaconn.Topic{Name: t, Partitions: s.cfg.TopicPartitions, ReplicationFactor: s.cfg.TopicReplicationFactor})
	}
	if len(create) > 0 {
		created, err := kafkaconn.CreateTopics(ctx, s.cl, s.log, s.cfg.DeliveryTimeout, create...)
		for _, c := range created {
			s.partitions[c.Name] = s.cfg.TopicPartitions
			s.log.Info("created topic", zap.String("topic", c.Name),
				zap.Int32("partitions", s.cfg.TopicPartitions), zap.Int16("replication_factor", c.ReplicationFactor))
		}
		if err != nil {
			return err
		}
	}
	for t, c := range s.describeLimits(ctx, missing, len(create) > 0) {
		if c.maxBytes < s.cfg.MaxMessageBytes {
			s.log.Info("topic accepts smaller batches than --kafka-max-message-bytes: capping its batches", zap.String("topic", t), zap.Int32("max_message_bytes", c.maxBytes))
		}
		if b := c.stamp; !b.logAppend && b.before != unbounded {
			s.log.Info("topic bounds record timestamps: a commit time outside them is replaced by the current time (header "+HeaderCommitTime+")",
				zap.String("topic", t), zap.Int64("before_max_ms", b.before.Milliseconds()), zap.Int64("after_max_ms", b.after.Milliseconds()))
		}
		s.storeLimits(t, c)
	}
	return nil
}
