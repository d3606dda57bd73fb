package inbox

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Dead-letter record headers: walrelay's names (package sink), so one
// tool reads the relay's and the consumers' dead letters. A dead-lettered
// record keeps its key, value, timestamp and headers (it can be replayed
// as it is) and gets these added.
const (
	HeaderErrorClass   = "walrelay.error.class"        // ClassHandler, ClassPermanent, ClassMissingID or ClassInvalidID
	HeaderErrorMessage = "walrelay.error.message"      // the last error, cut to 1 KiB
	HeaderEventID      = "walrelay.event.id"           // the id header's value, when there is one
	HeaderTopic        = "walrelay.original.topic"     // where the record was consumed from
	HeaderDropped      = "walrelay.dropped.column"     // "value" when the value was left out to fit
	HeaderDroppedBytes = "walrelay.dropped.bytes"      // and its size
	HeaderPartition    = "walrelay.original.partition" // inbox only: the record's partition
	HeaderOffset       = "walrelay.original.offset"    // inbox only: the record's offset
	HeaderGroup        = "walrelay.consumer.group"     // inbox only: the group that gave up on it
	HeaderAttempts     = "walrelay.attempts"           // inbox only: Handler attempts made
)

// Error classes (header walrelay.error.class).
const (
	ClassHandler   = "handler_failed"    // the Handler failed Config.MaxAttempts times
	ClassPermanent = "handler_permanent" // the Handler returned a Permanent error
	ClassMissingID = "missing_id"        // the record has no id header
	ClassInvalidID = "invalid_id"        // its id cannot be stored: not UTF-8, a NUL byte, too long
)

const maxErrorMessage = 1024

// deadLetterRecord builds the dead-letter record of r.
func (c *Consumer) deadLetterRecord(r *kgo.Record, class string, cause error, attempts int) *kgo.Record {
	msg := cause.Error()
	if len(msg) > maxErrorMessage {
		n := maxErrorMessage
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n]
	}
	hdrs := append(slices.Clip(slices.Clone(r.Headers)),
		kgo.RecordHeader{Key: HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderGroup, Value: []byte(c.cfg.Group)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	if id := header(r, c.cfg.IDHeader); len(id) > 0 {
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderEventID, Value: id})
	}
	return &kgo.Record{Topic: c.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: hdrs}
}

// deadLetter produces r's dead-letter record and waits for Kafka's
// acknowledgement, retrying until it has it, ctx ends or stop is closed
// (the partition revoked: its next owner handles r again).
func (c *Consumer) deadLetter(ctx context.Context, stop <-chan struct{}, r *kgo.Record, class string, cause error, attempts int) error {
	dl := c.deadLetterRecord(r, class, cause, attempts)
	b := backoff{next: c.cfg.RetryBackoff, max: c.cfg.MaxRetryBackoff}
	for {
		err := c.cl.ProduceSync(ctx, dl).FirstErr()
		if err == nil {
			c.deadLettered.Add(1)
			c.log.Warn("dead-lettered", zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
				zap.Int64("offset", r.Offset), zap.String("class", class), zap.Int("attempts", attempts), zap.Error(cause))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if (errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)) && dl.Value != nil {
			// N.B. the dead-letter topic accepts less than the consumed
			// one: the value is left out (its size recorded) rather than
			// the record retried for ever.
			dl.Headers = append(dl.Headers,
				kgo.RecordHeader{Key: HeaderDropped, Value: []byte("value")},
				kgo.RecordHeader{Key: HeaderDroppedBytes, Value: strconv.AppendInt(nil, int64(len(dl.Value)), 10)})
			dl.Value = nil
			continue
		}
		c.log.Warn("produce dead-letter record, retrying", zap.String("topic", dl.Topic), zap.Error(err))
		if err := b.waitOr(ctx, stop); err != nil {
			return err
		}
	}
}
