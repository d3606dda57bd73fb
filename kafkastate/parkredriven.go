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

// IsRedriven reports whether r is a Redriven record (its key, for
// RedrivenKey's lookups); a tombstone is not.
func IsRedriven(r *kgo.Record) (string, bool) {
	k := string(r.Key)
	return k, strings.HasPrefix(k, RedrivenPrefix) && r.Value != nil
}
