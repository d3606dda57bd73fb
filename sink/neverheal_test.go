package sink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// TestNeverHealingRejectionsFailTheSink: a produce response with an error
// that no retry heals fails the sink with an error the relay classifies as
// such (kafkaconn.Refusal: exit 2), nothing dead-lettered and the watermark
// unmoved. kfake stands in for the broker only for UNSUPPORTED_COMPRESSION_TYPE,
// which a real Kafka 4.4 never sends walrelay (franz-go sends zstd in
// produce v7 and later only, which every 4.x broker speaks; the other codecs
// are always supported); TOPIC_AUTHORIZATION_FAILED is shown on a real
// broker by test/e2e TestKafkaACLRefusals.
func TestNeverHealingRejectionsFailTheSink(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.UnsupportedCompressionType, kerr.TopicAuthorizationFailed} {
		t.Run(code.Message, func(t *testing.T) {
			c := newCluster(t)
			rejectTopic(t, c, "strict", code.Code)
			s, tr := newSink(t, c, OnPoisonDeadLetter, time.Minute)
			if err := s.Produce(context.Background(), tx(1, start+100, event("strict", "k", "id"))); err != nil {
				t.Fatal(err)
			}
			err := waitFailed(t, s)
			if _, always, ok := kafkaconn.Refusal(err); !ok || !always || !errors.Is(err, code) {
				t.Errorf("sink failed with %v: a refusal %v, always %v; want %s, never healing", err, ok, always, code.Message)
			}
			if errors.Is(err, ErrBatchRejected) || errors.Is(err, ErrPoison) {
				t.Errorf("sink failed with %v: the record is taken for poison", err)
			}
			if tr.Watermark() != start {
				t.Errorf("watermark %s, want %s: moved past the refused record", tr.Watermark(), start)
			}
		})
	}
}
