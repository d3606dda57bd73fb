package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// topicLimits are the batch caps of the topics the sink checked: the
// smaller of MaxMessageBytes and the topic's own max.message.bytes. The
// client reads them (kgo.ProducerBatchMaxBytesFn) when it first meets a
// partition of the topic, which is after ensureTopic stored them.
type topicLimits struct {
	def    int32    // MaxMessageBytes
	m      sync.Map // topic → int32
	stamps sync.Map // topic → stampBounds (stamp.go)
}

// bounds are the timestamp bounds of topic as last read.
func (l *topicLimits) bounds(topic string) stampBounds {
	if l == nil {
		return noBounds
	}
	if v, ok := l.stamps.Load(topic); ok {
		return v.(stampBounds)
	}
	return noBounds
}

// topicConf is what the sink reads of a topic's configs.
type topicConf struct {
	maxBytes int32 // the batch cap
	stamp    stampBounds
}

// store keeps what was read of topic.
func (s *Sink) storeLimits(topic string, c topicConf) {
	// N.B. stored before the topic's first record: the client reads
	// the cap when it first meets a partition of the topic.
	s.limits.m.Store(topic, c.maxBytes)
	s.limits.stamps.Store(topic, c.stamp)
	s.known[topic] = c.maxBytes
	s.topics.Store(topic, true) // shared.go
}

// batchMax is the record batch cap of topic.
func (l *topicLimits) batchMax(topic string) int32 {
	if v, ok := l.m.Load(topic); ok {
		return v.(int32)
	}
	return l.def
}

// describeLimits reads the effective max.message.bytes of topics (the
// topic's own setting, else the broker's message.max.bytes) and returns
// each topic's cap, with its timestamp bounds (stamp.go). A topic whose
// configs cannot be read keeps MaxMessageBytes and no bounds, with a
// warning: a batch it then rejects is isolated (see Isolation). created:
// some were just created, and a broker may not know them yet.
func (s *Sink) describeLimits(ctx context.Context, topics []string, created bool) map[string]topicConf {
	out := make(map[string]topicConf, len(topics))
	for _, t := range topics {
		out[t] = topicConf{maxBytes: s.cfg.MaxMessageBytes, stamp: noBounds}
	}
	var err error
	for try := 0; ; try++ {
		var rcs kadm.ResourceConfigs
		rcs, err = s.adm.DescribeTopicConfigs(ctx, topics...)
		for _, rc := range rcs {
			if rc.Err != nil {
				err = errors.Join(err, fmt.Errorf("describe configs of topic %s: %w", rc.Name, rc.Err))
				continue
			}
			c := topicConf{maxBytes: s.cfg.MaxMessageBytes, stamp: noBounds}
			for _, cf := range rc.Configs {
				if cf.Value == nil {
					continue
				}
				if cf.Key != "max.message.bytes" {
					c.stamp.set(cf.Key, *cf.Value)
					continue
				}
				if v, perr := strconv.ParseInt(*cf.Value, 10, 32); perr == nil && v > 0 && int32(v) < c.maxBytes {
					c.maxBytes = int32(v)
				}
			}
			if _, ok := out[rc.Name]; ok {
				out[rc.Name] = c
			}
		}
		if err == nil || !created || try >= 10 || !errors.Is(err, kerr.UnknownTopicOrPartition) {
			break
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		s.log.Warn("cannot read max.message.bytes and the timestamp bounds of topics: their batches are capped at --kafka-max-message-bytes, their records stamped with the commit time",
			zap.Strings("topics", topics), zap.Error(err))
	}
	return out
}

// loneBatchBytes is what r takes in a record batch of its own, counted as
// franz-go counts it against the batch cap (recBatch.tryBuffer: the batch
// overhead and the record's wire length, first in its batch, v2 format).
// A record over its topic's cap is failed by the client with
// MessageTooLarge however it is batched.
func loneBatchBytes(r *kgo.Record) int {
	const batchOverhead = 4 + 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 // franz-go's recordBatchOverhead
	l := 1 +                                                                    // attributes
		1 + // timestamp delta 0
		1 + // offset delta 0
		kbin.VarintLen(int32(len(r.Key))) + len(r.Key) +
		kbin.VarintLen(int32(len(r.Value))) + len(r.Value) +
		kbin.VarintLen(int32(len(r.Headers)))
	for _, h := range r.Headers {
		l += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + kbin.VarintLen(int32(len(h.Value))) + len(h.Value)
	}
	return batchOverhead + kbin.VarintLen(int32(l)) + l
}

// tooLargeErr is the error of a record larger than its topic's cap.
func tooLargeErr(topic string, size int, limit int32) error {
	return fmt.Errorf("%w: the record takes %d bytes in a batch of its own, topic %s accepts %d (the smaller of its max.message.bytes and --kafka-max-message-bytes)",
		kerr.MessageTooLarge, size, topic, limit)
}
