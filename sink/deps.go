package sink

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/kafkastate"
)

// Deps is what New is handed besides the user's settings (Config): the
// sink's collaborators, the state that outlives one sink (the relay keeps
// it across restarts), and the switches of tests and benchmarks.
type Deps struct {
	// Tracker receives every record's acknowledgement; its watermark is
	// what the stream confirms. Required.
	Tracker *checkpoint.Tracker
	// Source names the slot for the exactly-once checkpoint key (and the
	// default TransactionalID); the relay sets it with ExactlyOnce.
	Source kafkastate.Source
	// Metrics, if set, counts published, dead-lettered and failed records.
	Metrics *metrics.Metrics
	// CheckpointTopicReady says that the relay's marker store checked
	// (or created) Config.CheckpointTopic, compacted, already
	// (kafkastate.Open): with ExactlyOnce the sink then only reads its
	// limits instead of checking it again at every start.
	CheckpointTopicReady bool
	// Isolation carries across restarts the records to produce one at a
	// time after Kafka rejected a batch of them. Default nil: the sink's
	// own, which does not outlive it.
	Isolation *Isolation
	// CreatedTopics counts the topics created for MaxCreatedTopics.
	// Default nil: the sink's own, which does not outlive it.
	CreatedTopics *CreatedTopics
	// Tracer carries trace contexts into records and traces their
	// delivery (trace.go). Default nil: none.
	Tracer Tracer
	// Opts are extra client options (tests' hooks), applied after the
	// sink's own but before its logger: a kgo.WithLogger here is
	// overridden, as the sink's logger guards the order of records
	// (Sink.held).
	Opts []kgo.Opt
	// Null acknowledges every event at once without Kafka: a benchmark
	// option that separates decoding from producing. Never for production.
	Null bool
}

// ErrNullExactlyOnce refuses Deps.Null with Config.ExactlyOnce.
var ErrNullExactlyOnce = errors.New("--exactly-once needs Kafka: it cannot run with the null sink")
