package dlq

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/sink"
)

// Letter is one dead-letter record, decoded.
type Letter struct {
	Partition int32
	Offset    int64
	Time      time.Time // the record's timestamp: the event's commit time
	Class     string    // walrelay.error.class
	Message   string    // walrelay.error.message
	EventID   string    // walrelay.event.id
	Table     string    // walrelay.source.table
	CommitLSN string    // walrelay.commit.lsn
	Topic     string    // walrelay.original.topic; "" when it had none
	Aggregate string    // walrelay.parked.aggregate; "" when not parked
	Behind    string    // walrelay.parked.behind
	Pos       kafkastate.Pos
	HasPos    bool
	// Redrivable: the record holds the event's record as it was (key,
	// value, timestamp, its own headers first), so it can be re-published.
	Redrivable  bool
	origHeaders int
	partition   int32 // the original explicit partition; -1: the key picks it
	Record      *kgo.Record
}

// decodeLetter decodes dead-letter record r.
func decodeLetter(r *kgo.Record) Letter {
	l := Letter{Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp, Record: r, partition: -1}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case sink.HeaderErrorClass:
			l.Class = v
		case sink.HeaderErrorMessage:
			l.Message = v
		case sink.HeaderEventID:
			l.EventID = v
		case sink.HeaderTable:
			l.Table = v
		case sink.HeaderCommitLSN:
			l.CommitLSN = v
		case sink.HeaderTopic:
			l.Topic = v
		case sink.HeaderParkedAggregate:
			l.Aggregate = v
		case sink.HeaderParkedBehind:
			l.Behind = v
		case sink.HeaderPosition:
			if p, err := kafkastate.ParsePos(v); err == nil {
				l.Pos, l.HasPos = p, true
			}
		case sink.HeaderOriginalHeaders:
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= len(r.Headers) {
				l.origHeaders, l.Redrivable = n, true
			}
		case sink.HeaderPartition:
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				l.partition = int32(n)
			}
		}
	}
	l.Redrivable = l.Redrivable && l.Topic != ""
	return l
}

// Original is the event's record as the relay would have produced it:
// its topic, key, value, timestamp and own headers, and its own partition
// (--partition-column) or -1 (the key picks it). Only of a Redrivable
// letter.
func (l Letter) Original() *kgo.Record {
	r := l.Record
	return &kgo.Record{Topic: l.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		Headers: append([]kgo.RecordHeader(nil), r.Headers[:l.origHeaders]...), Partition: l.partition}
}
