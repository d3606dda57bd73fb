package kafkastate

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/preflight"
)

// Preflight is the "checkpoint topic" check of `walrelay check`, run on the
// caller's Kafka client (sink.Preflight's probes): topic exists and is
// compacted, or is missing and would be created (create).
func Preflight(topic string, create bool) func(context.Context, *kadm.Client) preflight.Check {
	return func(ctx context.Context, adm *kadm.Client) preflight.Check {
		c := preflight.Check{Name: "checkpoint topic " + topic}
		c.Note, c.Err = CheckTopic(ctx, adm, topic, create)
		return c
	}
}
