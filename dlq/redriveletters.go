package dlq

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/kafkastate"
)

// selecting reports whether redrive names dead letters (--offset,
// --reason, --original-topic) rather than a parked aggregate.
func (o Options) selecting() bool { return o.Offset != "" || o.Reason != "" || o.OrigTopic != "" }

// parseOffsets reads --offset: partition:offset, comma-separated.
func parseOffsets(s string) ([][2]int64, error) {
	var out [][2]int64
	for _, f := range strings.Split(s, ",") {
		p, o, ok := strings.Cut(strings.TrimSpace(f), ":")
		part, perr := strconv.ParseInt(p, 10, 32)
		off, oerr := strconv.ParseInt(o, 10, 64)
		if !ok || perr != nil || oerr != nil {
			return nil, fmt.Errorf("%w: --offset %q: want partition:offset, comma-separated, e.g. 0:42,1:7", errUsage, s)
		}
		out = append(out, [2]int64{part, off})
	}
	return out, nil
}

// redriveLetters re-publishes the dead letters --offset, --reason and
// --original-topic select (all that are given must match) to their
// original topics, partitions and headers, in commit order, then records
// each on the state topic (kafkastate.Redriven), after every record is
// acknowledged or, with --exactly-once, in the same Kafka transaction. A
// dead letter recorded so is left out; so is a parked aggregate's, which
// goes with its aggregate (redrive --aggregate), and one that holds no
// record. One --offset names that cannot be re-published is refused
// (exit 2), unless --skip-unpublishable.
func (t *Tool) redriveLetters(ctx context.Context) error {
	if t.o.Aggregate != "" || t.o.Topic != "" || t.o.Key != "" {
		return fmt.Errorf("%w: name a parked aggregate (--aggregate, --agg-topic, --agg-key) or dead letters (--offset, --reason, --original-topic), not both", errUsage)
	}
	var offsets map[[2]int64]bool
	if t.o.Offset != "" {
		list, err := parseOffsets(t.o.Offset)
		if err != nil {
			return err
		}
		offsets = map[[2]int64]bool{}
		for _, po := range list {
			offsets[po] = true
		}
	}
	v, err := t.scan(ctx)
	if err != nil {
		return err
	}
	if err := t.forgetStale(ctx, v); err != nil {
		return err
	}
	found := map[[2]int64]bool{}
	var pick []Letter
	var skipped, refused []string
	for _, l := range v.Letters {
		po := [2]int64{int64(l.Partition), l.Offset}
		if offsets != nil && !offsets[po] || t.o.Reason != "" && l.Class != t.o.Reason || t.o.OrigTopic != "" && l.Topic != t.o.OrigTopic {
			continue
		}
		found[po] = true
		at := fmt.Sprintf("%d:%d", l.Partition, l.Offset)
		why := ""
		switch {
		case v.redriven(t.cfg.DeadLetterTopic, l):
			skipped = append(skipped, at+": re-published already (the state topic records it)")
			continue
		case l.Aggregate != "":
			why = "of parked aggregate " + l.Aggregate + ": walrelay dlq redrive --aggregate " + l.Aggregate + " re-publishes it with the aggregate's other events, in order"
		case !l.Redrivable:
			why = "holds no record of the event (" + l.Class + "), only what it was made of"
		default:
			pick = append(pick, l)
			continue
		}
		if offsets != nil && !t.o.SkipBad {
			refused = append(refused, at+" "+why)
		} else {
			skipped = append(skipped, at+" "+why)
		}
	}
	for po := range offsets {
		if !found[po] {
			refused = append(refused, fmt.Sprintf("%d:%d: no such dead letter in %s", po[0], po[1], t.cfg.DeadLetterTopic))
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return fmt.Errorf("%w: cannot re-publish:\n  %s\n(--skip-unpublishable re-publishes the others)", errUsage, strings.Join(refused, "\n  "))
	}
	send := inCommitOrder(pick)
	var state []*kgo.Record
	now := time.Now().UTC()
	for _, l := range pick {
		state = append(state, kafkastate.RedrivenRecord(t.cfg.StateTopic, kafkastate.Redriven{DeadLetterTopic: t.cfg.DeadLetterTopic,
			Partition: l.Partition, Offset: l.Offset, Topic: l.Topic, EventID: l.EventID, Position: l.Pos.String(), At: now}))
	}
	for _, s := range skipped {
		fmt.Fprintf(t.out, "left out %s\n", s)
	}
	if len(send) == 0 {
		fmt.Fprintf(t.out, "no dead letter to re-publish\n")
		return nil
	}
	pub, err := t.publisher()
	if err != nil {
		return err
	}
	defer pub.Close()
	if err := t.publish(ctx, pub, send, state); err != nil {
		return err
	}
	for _, l := range send {
		fmt.Fprintf(t.out, "re-published %s/%d@%d (event %s, %s, at %s) to %s\n", t.cfg.DeadLetterTopic, l.Partition, l.Offset, l.EventID, l.Class, l.Pos, l.Topic)
	}
	fmt.Fprintf(t.out, "re-published %d dead letters in commit order; recorded on %s\n", len(send), t.cfg.StateTopic)
	return nil
}

// inCommitOrder sorts letters by commit position (then dead-letter
// partition and offset) and returns those to re-publish: an event
// dead-lettered twice (a relay restarted before confirming it) once.
func inCommitOrder(letters []Letter) []Letter {
	slices.SortStableFunc(letters, func(x, y Letter) int {
		if c := x.Pos.Compare(y.Pos); c != 0 {
			return c
		}
		if x.Partition != y.Partition {
			return int(x.Partition - y.Partition)
		}
		return int(x.Offset - y.Offset)
	})
	var send []Letter
	for i, l := range letters {
		if i == 0 || !l.HasPos || l.Pos != letters[i-1].Pos || l.EventID != letters[i-1].EventID {
			send = append(send, l)
		}
	}
	return send
}
