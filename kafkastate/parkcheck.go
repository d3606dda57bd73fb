package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconn"
	"github.com/walrelay/walrelay/internal/preflight"
)

// PreflightParked is the "parked aggregates" check of `walrelay check`
// with --on-poison=park: each aggregate parked on topic (any slot's) is a
// warning naming it, since when, behind which event and why, and the
// command that shows and redrives it. brokers and conn reach Kafka.
func PreflightParked(topic string, brokers []string, conn kafkaconn.Conn) func(context.Context, *kadm.Client) preflight.Check {
	return func(ctx context.Context, _ *kadm.Client) preflight.Check {
		opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, conn.Opts()...)
		c := preflight.Check{Name: "parked aggregates on " + topic}
		var st ParkState
		_, err := ReadParks(ctx, opts, topic, &st, nil)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			c.Note = "none: the topic does not exist yet"
			return c
		case err != nil:
			c.Err = err
			return c
		}
		n := 0
		for _, id := range slices.Sorted(maps.Keys(st.All())) {
			a := st.Get(id)
			if !a.IsParked() {
				continue
			}
			n++
			p := a.Park
			c.Warnings = append(c.Warnings, fmt.Sprintf("aggregate %s (topic %s, key %s) parked for %s behind event %s (%s): walrelay dlq show --aggregate %s, then walrelay dlq redrive",
				id, p.Topic, p.Key, time.Since(p.ParkedAt).Round(time.Second), p.FirstEventID, p.Reason, id))
		}
		c.Note = fmt.Sprintf("%d parked", n)
		return c
	}
}
