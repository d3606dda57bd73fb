package inbox

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// deadLetterHeaders are the headers a dead letter gets on top of the
// record's own (deadLetterRecord): Redrive takes them off again.
var deadLetterHeaders = []string{
	HeaderErrorClass, HeaderErrorMessage, HeaderEventID, HeaderTopic, HeaderPartition,
	HeaderOffset, HeaderGroup, HeaderAttempts, HeaderDropped, HeaderDroppedBytes,
}

// Redrive returns the record that replays the dead letter dl: to the topic
// it was consumed from (header walrelay.original.topic), with its key,
// value and own headers (the id among them) and without the dead-letter
// headers. Produce it once the cause is fixed: the consumer groups that
// dead-lettered the record apply it (a dead-lettered id is not marked
// processed), the groups that applied the original skip it as a duplicate,
// and a second replay of the same dead letter is a duplicate for all.
//
// N.B. the replayed record goes to the partition its key hashes to with
// the producer's partitioner (kgo's default is Kafka's), after the events
// that followed it: the aggregate's later events were applied before it.
//
// It fails for a dead letter whose value was left out to fit the
// dead-letter topic (walrelay.dropped.column), and for one without an
// original topic or an id (a missing_id dead letter cannot be
// deduplicated: add the id header first).
func Redrive(dl *kgo.Record, idHeader string) (*kgo.Record, error) {
	if idHeader == "" {
		idHeader = "id"
	}
	if len(header(dl, HeaderDropped)) > 0 {
		return nil, errors.New("redrive dead letter: its value was left out to fit the dead-letter topic (walrelay.dropped.column)")
	}
	topic := string(header(dl, HeaderTopic))
	if topic == "" {
		return nil, errors.New("redrive dead letter: no walrelay.original.topic header")
	}
	if len(header(dl, idHeader)) == 0 {
		return nil, errors.New("redrive dead letter: no " + idHeader + " header (it could not be deduplicated)")
	}
	hdrs := make([]kgo.RecordHeader, 0, len(dl.Headers))
	for _, h := range dl.Headers {
		if !slices.Contains(deadLetterHeaders, h.Key) {
			hdrs = append(hdrs, h)
		}
	}
	return &kgo.Record{Topic: topic, Key: dl.Key, Value: dl.Value, Headers: hdrs}, nil
}
