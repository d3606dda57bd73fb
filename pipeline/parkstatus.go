package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/pgcatalog"
)

// parkStatusTimeout bounds status's reading of the state topic.
const parkStatusTimeout = 20 * time.Second

// ParkedStatus is what `walrelay status` says of the aggregates of the
// slot parked on the state topic (--on-poison=park): a count, then one
// row per aggregate. read false (no Kafka settings given) says that they
// were not read and how to read them; a failure to read them is a row
// that says so and the error, never an empty list.
func ParkedStatus(ctx context.Context, cfg Config, read bool) ([]pgcatalog.StatusRow, error) {
	sc := cfg.Sink
	if !read {
		return []pgcatalog.StatusRow{{Name: "parked_aggregates", Value: "not read: give --brokers (and run's other Kafka settings) to read them from the state topic"}}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, parkStatusTimeout)
	defer cancel()
	parked, exists, err := kafkastate.ReadParked(ctx, sc.Brokers, sc.Kafka, sc.CheckpointTopic, cfg.Replication.Slot)
	switch {
	case err != nil:
		err = fmt.Errorf("read parked aggregates from state topic %s: %w", sc.CheckpointTopic, err)
		return []pgcatalog.StatusRow{{Name: "parked_aggregates", Value: "unknown: " + err.Error() + " (walrelay dlq list reads them too)"}}, err
	case !exists:
		return []pgcatalog.StatusRow{{Name: "parked_aggregates", Value: "0 (the state topic " + sc.CheckpointTopic + " does not exist yet)"}}, nil
	}
	rows := []pgcatalog.StatusRow{{Name: "parked_aggregates", Value: fmt.Sprintf("%d (state topic %s)", len(parked), sc.CheckpointTopic)}}
	for _, p := range parked {
		rows = append(rows, pgcatalog.StatusRow{Name: "parked", Value: fmt.Sprintf("topic %s key %s: %d events through %s, for %s behind event %s (%s); walrelay dlq show --aggregate %s",
			p.Topic, p.Key, p.Events, p.Through, time.Since(p.ParkedAt).Round(time.Second), p.FirstEventID, p.Reason, p.ID())})
	}
	return rows, nil
}
