package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decode"
)

// Row data decides topic names: which topics an event may go to and how
// many walrelay may create is decided here, before a topic is created.

// ErrTopicNotAllowed is wrapped when an event's topic does not match
// Config.TopicAllow, or is walrelay's own or Kafka's internal topic.
var ErrTopicNotAllowed = errors.New("topic not allowed")

// ErrTopicLimit is wrapped when an event's topic does not exist and
// creating it would pass Config.MaxCreatedTopics.
var ErrTopicLimit = errors.New("topic limit reached")

// Dead-letter reasons (walrelay.error.class) of refused topics.
const (
	ReasonTopicNotAllowed = "topic_not_allowed"
	ReasonTopicLimit      = "topic_limit"
)

// CreatedTopics counts the topics the sinks of one relay set out to create,
// so that Config.MaxCreatedTopics holds across the pipeline's restarts.
type CreatedTopics struct{ n atomic.Int64 }

// NewCreatedTopics returns a count at zero.
func NewCreatedTopics() *CreatedTopics { return &CreatedTopics{} }

// take counts one more topic unless max are counted already.
func (c *CreatedTopics) take(max int) bool {
	for {
		n := c.n.Load()
		if n >= int64(max) {
			return false
		}
		if c.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Count is how many topics were counted.
func (c *CreatedTopics) Count() int { return int(c.n.Load()) }

// compileTopicAllow compiles pattern as a match of the whole topic name.
func compileTopicAllow(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topic allow pattern %q: %w", pattern, err)
	}
	return re, nil
}

// reserved reports whether topic is one an event may never go to:
// walrelay's dead-letter and checkpoint topics (a row could forge dead
// letters, or a checkpoint that makes --exactly-once skip transactions)
// and Kafka's internal topics.
func (s *Sink) reserved(topic string) bool {
	return topic == s.cfg.DeadLetterTopic || topic == s.cfg.CheckpointTopic || strings.HasPrefix(topic, "__")
}

// refuse reports why an event may not go to topic, or nil.
func (s *Sink) refuse(topic string) error {
	if s.reserved(topic) {
		return fmt.Errorf("%w: %s is walrelay's dead-letter or checkpoint topic or one of Kafka's internal topics: an event may not go there (check the row's routing column)", ErrTopicNotAllowed, topic)
	}
	if s.allow != nil && !s.allow.MatchString(topic) {
		return fmt.Errorf("%w: %s does not match --topic-allow %q", ErrTopicNotAllowed, topic, s.cfg.TopicAllow)
	}
	return nil
}

// screenTopics decides which of topics (not yet known, each once) the
// part's events may go to. It returns those to check or create, for the
// others why not, and the details of the topics it had to list (nil when
// it listed none; ensureTopic then lists them). N.B. decided before
// anything is created: a topic refused here is never created, and its
// events are poison events.
func (s *Sink) screenTopics(ctx context.Context, topics []string) ([]string, map[string]error, kadm.TopicDetails, error) {
	var refused map[string]error
	ok := topics[:0:0]
	for _, t := range topics {
		if err := s.refuse(t); err != nil {
			if refused == nil {
				refused = make(map[string]error)
			}
			refused[t] = err
			continue
		}
		ok = append(ok, t)
	}
	if len(ok) == 0 || !s.cfg.CreateTopics || s.cfg.MaxCreatedTopics <= 0 {
		return ok, refused, nil, nil
	}
	// N.B. which of them exist: only a topic walrelay would create
	// counts against the cap (one admin request, for new topics only).
	details, err := s.adm.ListTopics(ctx, ok...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list topics: %w", err)
	}
	kept := ok[:0]
	for _, t := range ok {
		d, exists := details[t]
		if exists && (d.Err == nil || !errors.Is(d.Err, kerr.UnknownTopicOrPartition)) {
			kept = append(kept, t)
			continue
		}
		if s.created.take(s.cfg.MaxCreatedTopics) {
			kept = append(kept, t)
			continue
		}
		if refused == nil {
			refused = make(map[string]error)
		}
		refused[t] = fmt.Errorf("%w: %s does not exist and walrelay created %d topics already (--max-created-topics %d): create it, raise the cap, or narrow --topic-allow",
			ErrTopicLimit, t, s.created.Count(), s.cfg.MaxCreatedTopics)
		s.log.Warn("topic not created: --max-created-topics reached", zap.String("topic", t), zap.Int("max_created_topics", s.cfg.MaxCreatedTopics))
	}
	return kept, refused, details, nil
}

// refuseRecord dead-letters a record whose topic was refused, or halts.
func (s *Sink) refuseRecord(ctx context.Context, tx *decode.Tx, r *kgo.Record, why error, a *txAcks, meta recordMeta) (*txAcks, error) {
	return s.rejectRecord(ctx, tx, r, why, "topic refused: dead-lettered", a, meta)
}
