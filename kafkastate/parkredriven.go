package kafkastate

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RedrivenPrefix is the key prefix of walrelay dlq's record of a dead
// letter it re-published on its own, not as part of a parked aggregate
// (redrive --offset, --reason, --original-topic):
//
//	redriven/<dead-letter topic>/<partition>/<offset>
//
// A redrive that selects it again leaves it out. The relay ignores these
// records.
const RedrivenPrefix = "redriven/"

// Redriven says that the dead letter at Partition and Offset of
// DeadLetterTopic was re-published to Topic.
type Redriven struct {
	DeadLetterTopic string    `json:"dead_letter_topic"`
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	Topic           string    `json:"topic"`
	EventID         string    `json:"event_id,omitempty"`
	Position        string    `json:"position,omitempty"`
	At              time.Time `json:"at"`
}

// RedrivenKey is the state topic key of the dead letter at partition and
// offset of topic dlq.
func RedrivenKey(dlq string, partition int32, offset int64) string {
	return RedrivenPrefix + dlq + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}

// RedrivenRecord is the record of r on topic.
func RedrivenRecord(topic string, r Redriven) *kgo.Record {
	v, _ := json.Marshal(r)
	return &kgo.Record{Topic: topic, Key: []byte(RedrivenKey(r.DeadLetterTopic, r.Partition, r.Offset)), Value: v}
}

// DecodeRedriven reads r: its key, and its Redriven record unless r is
// that key's tombstone (ok and tombstone); ok false for another record.
// A value it cannot read is a record of the key all the same, empty (an
// older walrelay's).
func DecodeRedriven(r *kgo.Record) (key string, red Redriven, ok, tombstone bool) {
	key = string(r.Key)
	if !strings.HasPrefix(key, RedrivenPrefix) {
		return key, red, false, false
	}
	if r.Value == nil {
		return key, red, true, true
	}
	_ = json.Unmarshal(r.Value, &red)
	return key, red, true, false
}

// RedrivenTombstone forgets the Redriven record of key on topic: the dead
// letter it names is gone (past the dead-letter topic's retention, or the
// topic made anew).
func RedrivenTombstone(topic, key string) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(key)}
}
