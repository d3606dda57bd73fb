package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walrelay/walrelay/sink"
)

// kafkaPings asks Kafka whether it answers (sink.Sink.Ping, a metadata
// request) beside the watch loop, one request at a time, and notes when it
// does: /readyz says not ready once no answer came for Relay.kafkaGrace.
//
// N.B. a ping may take the whole grace: an answer later than the poll
// interval is still an answer. With --status-interval 1s a ping gave up
// after a second, and a loaded broker answering metadata requests in one
// to a few seconds (they queue on one connection) made /readyz say "kafka
// has not answered for 38s" while the pipeline's records were acknowledged
// (make fleet-group; TestReadinessToleratesSlowKafkaAnswers).
type kafkaPings struct {
	busy atomic.Bool
	wg   sync.WaitGroup
}

// start sends a ping unless one is under way; it ends after grace or when
// ctx ends (the watch loop's end).
func (k *kafkaPings) start(ctx context.Context, snk *sink.Sink, grace time.Duration, answered *atomic.Int64) {
	if !k.busy.CompareAndSwap(false, true) {
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer k.busy.Store(false)
		kctx, cancel := context.WithTimeout(ctx, grace)
		defer cancel()
		if snk.Ping(kctx) == nil {
			answered.Store(time.Now().UnixNano())
		}
	}()
}

// wait returns once the ping under way, if any, has ended.
func (k *kafkaPings) wait() { k.wg.Wait() }
