package fleet

import (
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/sink"
)

// shareKafka gives the pipelines whose Kafka settings are equal one
// producer client (sink.SharedClient), instead of one each: one set of
// broker connections, metadata and batches. A pipeline keeps a client of
// its own when it must:
//   - --exactly-once: its transactional id is its own, and a Kafka
//     transaction spans every record of its client;
//   - the bench build's null sink, which has no Kafka.
//
// Pipelines whose client settings differ (kafka-linger,
// kafka-compression, kafka-max-message-bytes) get one shared client per
// distinct setting (sink.SharedKey). Each pipeline's marker store keeps a
// client of its own (package kafkastate). It returns the clients, for
// closeKafka.
func shareKafka(plans []plan, log *zap.Logger) []*sink.SharedClient {
	byKey := map[string]*sink.SharedClient{}
	var out []*sink.SharedClient
	own := 0
	for i := range plans {
		c := &plans[i].cfg
		key, ok := sink.SharedKey(c.Sink)
		if !ok || c.NullSink {
			own++
			continue
		}
		sc := byKey[key]
		if sc == nil {
			sc = sink.NewSharedClient(c.Sink, log.Named("shared"))
			byKey[key] = sc
			out = append(out, sc)
		}
		c.Sink.Shared = sc
	}
	log.Info("kafka producer clients", zap.Int("shared", len(out)), zap.Int("pipelines_sharing", len(plans)-own), zap.Int("own", own))
	return out
}

// closeKafka closes the shared clients once every pipeline has stopped.
func closeKafka(clients []*sink.SharedClient) {
	for _, c := range clients {
		c.Close()
	}
}
