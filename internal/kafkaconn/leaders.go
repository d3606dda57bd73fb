package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errNoLeader is why a created topic is not ready while the broker lists it
// without partitions or a partition without a leader.
var errNoLeader = errors.New("no leader yet")

// AwaitLeaders waits until every partition of topics, just created, answers
// on its leader, and returns how many tries that took; an error only when
// ctx ends or timeout passes first. It only reads; each request goes once to
// one broker (no client retries), so a partition not ready yet is asked
// again at once rather than after the client's backoff.
//
// N.B. CreateTopics returns once the controller has recorded the topic; the
// leaders take their partitions on afterwards. A record handed to the client
// before then meets NOT_LEADER_FOR_PARTITION (or an unknown topic), and
// franz-go retries such a batch after a metadata refresh that waits out
// MetadataMinAge (5s): the first records of a new topic stalled for
// seconds. A partition that answers ListOffsets on its leader accepts a
// produce request there; the client learns the leaders in the immediate
// metadata load it runs for a topic's first record.
func AwaitLeaders(ctx context.Context, cl *kgo.Client, topics []string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 5 * time.Millisecond
	for tries := 1; ; tries++ {
		err := leadersReady(ctx, cl, topics)
		if err == nil {
			return tries, nil
		}
		select {
		case <-ctx.Done():
			return tries, fmt.Errorf("wait for the leaders of created topics: %w (last: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// leadersReady returns nil when every partition of topics answers
// ListOffsets on its leader, else why one does not. Each request goes once
// to one broker: the client's sharded requests would retry a
// NOT_LEADER_FOR_PARTITION themselves, after their own backoff.
func leadersReady(ctx context.Context, cl *kgo.Client, topics []string) error {
	mreq := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	byLeader := make(map[int32]*kmsg.ListOffsetsRequest)
	listed := 0
	for _, mt := range mresp.Topics {
		if mt.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", *mt.Topic, err)
		}
		if len(mt.Partitions) == 0 {
			return fmt.Errorf("topic %s: %w", *mt.Topic, errNoLeader)
		}
		listed++
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = *mt.Topic
		for _, mp := range mt.Partitions {
			if err := kerr.ErrorForCode(mp.ErrorCode); err != nil {
				return fmt.Errorf("topic %s partition %d: %w", *mt.Topic, mp.Partition, err)
			}
			if mp.Leader < 0 {
				return fmt.Errorf("topic %s partition %d: %w", *mt.Topic, mp.Partition, errNoLeader)
			}
			req := byLeader[mp.Leader]
			if req == nil {
				req = kmsg.NewPtrListOffsetsRequest()
				req.ReplicaID = -1
				byLeader[mp.Leader] = req
			}
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != rt.Topic {
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = mp.Partition, -1, mp.LeaderEpoch
			lt := &req.Topics[len(req.Topics)-1]
			lt.Partitions = append(lt.Partitions, rp)
		}
	}
	if listed != len(topics) {
		return fmt.Errorf("metadata listed %d of %d topics: %w", listed, len(topics), errNoLeader)
	}
	for leader, req := range byLeader {
		kresp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("list offsets on broker %d: %w", leader, err)
		}
		for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("topic %s partition %d on broker %d: %w", t.Topic, p.Partition, leader, err)
				}
			}
		}
	}
	return nil
}
