package dlq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/kafkastate"
)

// DefaultTransactionalID is redrive's transactional id with --exactly-once.
const DefaultTransactionalID = "walrelay-dlq-redrive"

// redrive re-publishes a parked aggregate's events to their topics in
// commit order and releases it, going on while the relay answers that it
// parked more meanwhile (doc.go, the protocol).
func (t *Tool) redrive(ctx context.Context) error {
	if t.o.selecting() {
		return t.redriveLetters(ctx)
	}
	pub, err := t.publisher()
	if err != nil {
		return err
	}
	defer pub.Close()
	for {
		v, id, a, err := t.parkedAggregate(ctx)
		if err != nil || a == nil {
			return err
		}
		through := a.Park.Through
		pending, err := t.pendingThrough(ctx, v, id, through)
		if err != nil {
			return err
		}
		var bad []string
		for _, l := range pending {
			if !l.Redrivable {
				bad = append(bad, fmt.Sprintf("%s (%s, event %s, %s/%d@%d): %s", l.Pos, l.Class, l.EventID, t.cfg.DeadLetterTopic, l.Partition, l.Offset, l.Message))
			}
		}
		if len(bad) > 0 && !t.o.SkipBad {
			return fmt.Errorf("%w: %d parked events hold no record of the event and cannot be re-published:\n  %s\nre-run with --skip-unpublishable to leave them in the dead-letter topic and re-publish the others, or discard the aggregate (walrelay dlq discard)",
				errUsage, len(bad), strings.Join(bad, "\n  "))
		}
		rel := kafkastate.Release{Aggregate: a.Park.Aggregate, Through: through, By: "redrive", Records: len(pending) - len(bad), At: time.Now().UTC()}
		from, err := t.stateEnds(ctx)
		if err != nil {
			return err
		}
		if err := t.publish(ctx, pub, pending, []*kgo.Record{kafkastate.ReleaseRecord(t.cfg.StateTopic, rel)}); err != nil {
			return err
		}
		fmt.Fprintf(t.out, "re-published %d events of aggregate %s (%s through %s) to %s; released through %s\n",
			rel.Records, id, a.Park.Start, through, a.Park.Topic, through)
		if again, err := t.answered(ctx, id, through, from); err != nil || !again {
			return err
		}
	}
}

// discard releases a parked aggregate without re-publishing its events:
// they stay in the dead-letter topic, and the release record says so.
func (t *Tool) discard(ctx context.Context) error {
	_, id, a, err := t.parkedAggregate(ctx)
	if err != nil || a == nil {
		return err
	}
	from, err := t.stateEnds(ctx)
	if err != nil {
		return err
	}
	rel := kafkastate.Release{Aggregate: a.Park.Aggregate, Through: a.Park.Through, By: "discard", At: time.Now().UTC()}
	if err := t.cl.ProduceSync(ctx, kafkastate.ReleaseRecord(t.cfg.StateTopic, rel)).FirstErr(); err != nil {
		return fmt.Errorf("write release record to %s: %w", t.cfg.StateTopic, err)
	}
	fmt.Fprintf(t.out, "discarded aggregate %s through %s: its parked events stay in %s, not re-published\n", id, a.Park.Through, t.cfg.DeadLetterTopic)
	if again, err := t.answered(ctx, id, a.Park.Through, from); err != nil || !again {
		return err
	}
	fmt.Fprintf(t.out, "the relay parked events after the discarded ones: the aggregate stays parked (walrelay dlq list)\n")
	return nil
}

// parkedAggregate reads the topics and resolves the aggregate named; a
// nil state (and no error) when it is not parked, which it prints.
func (t *Tool) parkedAggregate(ctx context.Context) (*View, string, *kafkastate.Parked, error) {
	v, err := t.scan(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	id, err := t.aggregate(v)
	if err != nil {
		return nil, "", nil, err
	}
	a := v.Parks.Get(id)
	if !a.IsParked() {
		fmt.Fprintf(t.out, "aggregate %s is not parked\n", id)
		return v, id, nil, nil
	}
	return v, id, a, nil
}

// pendingThrough is the aggregate's pending dead letters once the one at
// through, the newest the relay recorded, is among them: its dead letter
// and park record are written side by side, so it may come a moment
// later, or again after a relay restart.
func (t *Tool) pendingThrough(ctx context.Context, v *View, id string, through kafkastate.Pos) ([]Letter, error) {
	deadline := time.Now().Add(t.o.Wait)
	for {
		pending := pendingLetters(v, id)
		if n := len(pending); n > 0 && pending[n-1].Pos == through {
			return pending, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the dead-letter topic %s holds no dead letter of the newest parked event (%s), which the state topic records: a relay writes it again when it restarts; run redrive again then", t.cfg.DeadLetterTopic, through)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		var err error
		if v, err = t.scan(ctx); err != nil {
			return nil, err
		}
	}
}

// publisher is the client redrive publishes with: acks from all in-sync
// replicas, idempotent, the relay's partitioning (murmur2 of the key, or
// the event's own partition); transactional with --exactly-once.
func (t *Tool) publisher() (*kgo.Client, error) {
	opts := append(t.opts(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(ownPartitioner{kgo.StickyKeyPartitioner(nil)}))
	if t.cfg.ExactlyOnce {
		id := t.cfg.TransactionalID
		if id == "" {
			id = DefaultTransactionalID
		}
		opts = append(opts, kgo.TransactionalID(id))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// publish re-publishes the redrivable letters in order, then writes the
// state records (the release, or what was re-published): after every
// record is acknowledged, or, with --exactly-once, in the same Kafka
// transaction.
func (t *Tool) publish(ctx context.Context, pub *kgo.Client, letters []Letter, state []*kgo.Record) error {
	if t.cfg.ExactlyOnce {
		if err := pub.BeginTransaction(); err != nil {
			return fmt.Errorf("begin kafka transaction: %w", err)
		}
	}
	var n int
	done := make(chan error, len(letters)+1)
	promise := func(_ *kgo.Record, err error) { done <- err }
	pause, _ := strconv.Atoi(os.Getenv("WALRELAY_TEST_REDRIVE_PAUSE_AFTER"))
	for _, l := range letters {
		if l.Redrivable {
			// N.B. one client, in order: the idempotent producer keeps
			// the order of the records of a partition.
			pub.Produce(ctx, l.Original(), promise)
			n++
			if n == pause && !t.cfg.ExactlyOnce {
				// The tests' kill -9 midway (test/e2e/park_test.go): the
				// records so far are in Kafka, the release is not.
				// N.B. only once they are acknowledged: a record Kafka
				// refused is an error here as below.
				var errs error
				for range n {
					errs = errors.Join(errs, <-done)
				}
				if errs != nil {
					return fmt.Errorf("re-publish (nothing is released or recorded on the state topic; run redrive again once the cause is fixed): %w", errs)
				}
				fmt.Fprintf(t.out, "redrive paused after %d records (WALRELAY_TEST_REDRIVE_PAUSE_AFTER)\n", n)
				<-ctx.Done()
				return ctx.Err()
			}
		}
	}
	if t.cfg.ExactlyOnce {
		for _, r := range state {
			pub.Produce(ctx, r, promise)
			n++
		}
	}
	var errs error
	for range n {
		errs = errors.Join(errs, <-done)
	}
	if t.cfg.ExactlyOnce {
		commit := kgo.TryCommit
		if errs != nil {
			commit = kgo.TryAbort
		}
		if err := pub.EndTransaction(ctx, commit); err != nil {
			errs = errors.Join(errs, fmt.Errorf("end kafka transaction: %w", err))
		}
	}
	if errs != nil {
		return fmt.Errorf("re-publish (nothing is released or recorded on the state topic; run redrive again once the cause is fixed): %w", errs)
	}
	if !t.cfg.ExactlyOnce {
		// N.B. only once every re-published record is acknowledged.
		if err := pub.ProduceSync(ctx, state...).FirstErr(); err != nil {
			return fmt.Errorf("write state records to %s: %w", t.cfg.StateTopic, err)
		}
	}
	return nil
}

// stateEnds lists the state topic's end offsets, where the relay's
// answer to a release written next will be.
func (t *Tool) stateEnds(ctx context.Context) (map[int32]kgo.Offset, error) {
	ends, err := kadm.NewClient(t.cl).ListEndOffsets(ctx, t.cfg.StateTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of topic %s: %w", t.cfg.StateTopic, err)
	}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) { from[o.Partition] = kgo.NewOffset().At(o.Offset) })
	return from, nil
}

// answered waits up to --wait for the relay's answer to a release of
// aggregate id through through, read from the offsets from on; again
// says that the relay parked more events, which redrive re-publishes
// next.
func (t *Tool) answered(ctx context.Context, id string, through kafkastate.Pos, from map[int32]kgo.Offset) (again bool, err error) {
	cl, err := kgo.NewClient(append(t.opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.cfg.StateTopic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return false, fmt.Errorf("consumer of topic %s: %w", t.cfg.StateTopic, err)
	}
	defer cl.Close()
	wctx, cancel := context.WithTimeout(ctx, t.o.Wait)
	defer cancel()
	for {
		fs := cl.PollFetches(wctx)
		if wctx.Err() != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			fmt.Fprintf(t.out, "no relay answered within %s: a relay un-parks the aggregate once it reads the release (when it starts, at the latest)\n", t.o.Wait)
			return false, nil
		}
		var ack *kafkastate.Ack
		fs.EachRecord(func(r *kgo.Record) {
			if a, ok := kafkastate.DecodeAck(r); ok && a.ID() == id && a.Released.Compare(through) >= 0 {
				ack = &a
			}
		})
		switch {
		case ack == nil:
		case ack.Parked:
			fmt.Fprintf(t.out, "the relay parked events of the aggregate after %s (through %s): going on with them\n", through, ack.ParkedThrough)
			return true, nil
		default:
			fmt.Fprintf(t.out, "the relay un-parked the aggregate: its events flow again\n")
			return false, nil
		}
	}
}

// ownPartitioner keeps a record's own partition (>= 0) and hashes the
// key of the others, as the relay does.
type ownPartitioner struct{ keyed kgo.Partitioner }

func (p ownPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return ownTopicPartitioner{p.keyed.ForTopic(topic)}
}

type ownTopicPartitioner struct{ kgo.TopicPartitioner }

func (ownTopicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p ownTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition)
	}
	return p.TopicPartitioner.Partition(r, n)
}
