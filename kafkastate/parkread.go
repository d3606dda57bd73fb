package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadParks reads topic with a read_committed consumer up to each
// partition's last stable offset, folding every park and release record
// into st; it returns the offsets to follow the topic from (FollowParks).
// opts connect a client (brokers, TLS, SASL). With wait, the relay's
// read: first every transaction on the topic is decided (settledEnds, which
// tells wait what it waits for), so that no park record committed before
// is missed; the caller has fenced its own older producers. Without (nil),
// a view (walrelay status, check): the last stable offsets as they are.
func ReadParks(ctx context.Context, opts []kgo.Opt, topic string, st *ParkState, wait func(undecided string)) (map[int32]kgo.Offset, error) {
	ctx, cancel := context.WithTimeout(ctx, checkpointReadTimeout)
	defer cancel()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("state topic client: %w", err)
	}
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	for try := 0; ; try++ {
		// N.B. settled: the park records this slot's pipeline committed
		// after another producer's transaction on the topic began lie
		// above the last stable offset until that one is decided.
		if wait != nil {
			ends, err = settledEnds(ctx, adm, topic, wait)
		} else if ends, err = adm.ListCommittedOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) || try >= 50 {
			cl.Close()
			return nil, fmt.Errorf("list offsets of state topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			cl.Close()
			return nil, fmt.Errorf("list offsets of state topic %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	cl.Close()
	want := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		from[o.Partition] = kgo.NewOffset().AtStart()
	})
	next := map[int32]int64{}
	err = consumeParks(ctx, opts, topic, from, st, func(p int32, off int64) bool {
		next[p] = off
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}, nil)
	if err != nil {
		return nil, err
	}
	follow := map[int32]kgo.Offset{}
	for p, end := range want {
		follow[p] = kgo.NewOffset().At(max(end, next[p]))
	}
	return follow, nil
}

// FollowParks hands each record of topic from the offsets from to apply
// as it comes (read_committed), until ctx ends or a fetch fails.
func FollowParks(ctx context.Context, opts []kgo.Opt, topic string, from map[int32]kgo.Offset, apply func(*kgo.Record)) error {
	return consumeParks(ctx, opts, topic, from, nil, nil, apply)
}

// consumeParks reads topic from the offsets from, read_committed: each
// record goes to st (or apply), and after each record done(partition,
// next offset) says whether to stop; nil done: until ctx ends.
func consumeParks(ctx context.Context, opts []kgo.Opt, topic string, from map[int32]kgo.Offset, st *ParkState,
	done func(int32, int64) bool, apply func(*kgo.Record)) error {
	if done != nil && done(-1, 0) {
		return nil
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		// N.B. read_committed: a park record of an aborted Kafka
		// transaction (exactly-once) never parked anything. Control
		// records are kept so that the position reaches the last stable
		// offset.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("state topic consumer: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			if done == nil {
				return err
			}
			return fmt.Errorf("read state topic %s up to its last stable offsets: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return fmt.Errorf("read state topic %s: %w", topic, ferr)
		}
		var stop bool
		var aerr error
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				if apply != nil {
					apply(r)
				} else if _, err := st.Apply(r); err != nil {
					aerr = errors.Join(aerr, err)
				}
			}
			if done != nil {
				stop = done(r.Partition, r.Offset+1)
			}
		})
		if aerr != nil {
			return aerr
		}
		if stop {
			return nil
		}
	}
}
