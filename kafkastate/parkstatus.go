package kafkastate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// ReadParked reads the aggregates of slot (a slot of that name on any
// server and database) that are parked on the state topic, by ID, within
// ctx: `walrelay status`. exists is false when the topic does not exist,
// so nothing was ever parked there; any failure to read it is an error,
// never an empty answer.
func ReadParked(ctx context.Context, brokers []string, conn kafkaconn.Conn, topic, slot string) (parked []*Park, exists bool, err error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, conn.Opts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, false, fmt.Errorf("state topic client: %w", err)
	}
	// N.B. ReadParks waits for a topic that is being created; status
	// asks once whether it exists.
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	cl.Close()
	if err != nil {
		return nil, false, fmt.Errorf("list topic %s: %w", topic, err)
	}
	if !topics.Has(topic) {
		return nil, false, nil
	}
	var st ParkState
	if _, err := ReadParks(ctx, opts, topic, &st, nil); err != nil {
		return nil, true, err
	}
	for _, id := range slices.Sorted(maps.Keys(st.All())) {
		if a := st.Get(id); a.IsParked() && a.Park.Slot == slot {
			parked = append(parked, a.Park)
		}
	}
	return parked, true, nil
}
