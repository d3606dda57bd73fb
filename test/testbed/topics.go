package testbed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Uncached makes kadm's topic listings through ctx ask the broker: without
// it, franz-go answers a listing from its metadata cache when that is
// younger than MetadataMinAge (5 s), and a listing of every topic from the
// cache a consumer filled before a topic was created leaves the topic out.
// (kadm's authorized operations are asked for the broker alone knows.)
func Uncached(ctx context.Context) context.Context { return kadm.WithAuthorizedOps(ctx) }

// CreateTopics creates topics through cl with partitions partitions each
// (replication factor 1) and configs (nil: the broker's defaults), and waits
// until every partition has a leader. A topic that exists is an error.
func CreateTopics(ctx context.Context, cl *kgo.Client, partitions int32, configs map[string]*string, topics ...string) error {
	return createTopics(ctx, cl, partitions, configs, false, topics)
}

// RecreateTopics deletes topics if they exist (DeleteTopics) and creates
// them (CreateTopics); a topic whose deletion is still in progress is
// created again until ctx ends.
func RecreateTopics(ctx context.Context, cl *kgo.Client, partitions int32, configs map[string]*string, topics ...string) error {
	if err := DeleteTopics(ctx, cl, topics...); err != nil {
		return err
	}
	return createTopics(ctx, cl, partitions, configs, true, topics)
}

func createTopics(ctx context.Context, cl *kgo.Client, partitions int32, configs map[string]*string, retryExisting bool, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	adm := kadm.NewClient(cl)
	for todo := topics; len(todo) > 0; {
		resps, err := adm.CreateTopics(ctx, partitions, 1, configs, todo...)
		if err != nil {
			return fmt.Errorf("create topics %v: %w", todo, err)
		}
		todo = nil
		for _, r := range resps.Sorted() {
			switch {
			case retryExisting && errors.Is(r.Err, kerr.TopicAlreadyExists):
				todo = append(todo, r.Topic) // a deletion still in progress
			case r.Err != nil:
				return fmt.Errorf("create topic %s: %w (%s)", r.Topic, r.Err, r.ErrMessage)
			}
		}
		if len(todo) > 0 {
			if err := pause(ctx, 200*time.Millisecond); err != nil {
				return fmt.Errorf("create topics %v: %w", todo, err)
			}
		}
	}
	for {
		tds, err := adm.ListTopics(Uncached(ctx), topics...)
		ready := err == nil
		for _, topic := range topics {
			td, ok := tds[topic]
			ready = ready && ok && td.Err == nil && len(td.Partitions) == int(partitions)
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
		}
		if ready {
			return nil
		}
		if perr := pause(ctx, 50*time.Millisecond); perr != nil {
			return fmt.Errorf("wait for a leader of every partition of %v: %w (last error: %v)", topics, perr, err)
		}
	}
}

// DeleteTopics deletes through cl those of topics that exist and waits
// until the broker no longer lists them.
func DeleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	adm := kadm.NewClient(cl)
	if err := deleteTopics(ctx, adm, topics); err != nil {
		return err
	}
	for {
		tds, err := adm.ListTopics(Uncached(ctx), topics...)
		gone := err == nil && !slices.ContainsFunc(topics, func(t string) bool {
			td, ok := tds[t]
			return ok && td.Err == nil
		})
		if gone {
			return nil
		}
		if perr := pause(ctx, 200*time.Millisecond); perr != nil {
			return fmt.Errorf("wait for topics %v to go: %w (last error: %v)", topics, perr, err)
		}
	}
}

// deleteTopics asks for the deletion of those of topics that exist.
func deleteTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	resps, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// pause waits d, or returns ctx.Err() when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
