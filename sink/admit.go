package sink

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/kafkastate"
)

// Admission decides what becomes of each event of a part before its
// record is handed to the client: produced with the others, produced
// alone (isolated), dead-lettered with its reason, or the relay halts on
// it. It reads the event and what the sink knows (gate), never Kafka, and
// changes nothing. The one thing it cannot know, whether partitions were
// added to a topic since they were counted, it asks for (recount).

// ErrPoison is wrapped when an event cannot become a record and the relay
// must halt on it.
var ErrPoison = errors.New("poison event")

// outcome is what becomes of an event.
type outcome uint8

const (
	produce    outcome = iota // handed to the client with the part's other records
	isolate                   // produced alone and waited for (Isolation)
	deadLetter                // a dead-letter record in its place (--on-poison=dead-letter)
	halt                      // the relay stops: nothing from it on is confirmed (--on-poison=halt)
	recount                   // its topic's partitions must be counted again before it is decided
	parkNew                   // dead-lettered, and its aggregate parked behind it (--on-poison=park)
	parkBehind                // dead-lettered behind its parked aggregate's first (--on-poison=park)
)

// cause is why an event is not produced.
type cause uint8

const (
	causeNone         cause = iota
	causePoison             // it could not become a record (decode set ev.Err)
	causeBadPartition       // the partition it names is not one of its topic's
	causeTopicRefused       // its topic is not allowed, or would be one more than --max-created-topics
	causeTooLarge           // its record is larger than its topic accepts in a batch of its own
)

// verdict is admission's decision on one event.
type verdict struct {
	outcome outcome
	cause   cause  // of deadLetter and halt
	why     error  // of deadLetter and halt: what the dead letter or the halt says
	reason  string // of deadLetter and halt: the dead letter's walrelay.error.class
}

// gate is what admission knows: the sink's settings and state, read for
// one part.
type gate struct {
	halt       bool             // --on-poison=halt
	refused    map[string]error // the part's topics its events may not go to, and why (screenTopics)
	caps       map[string]int32 // batch caps of the topics checked (limits.go)
	partitions map[string]int32 // partition counts of the topics checked
	isoThrough pglogrepl.LSN    // isolating the transactions up to this commit LSN
	isoTopics  map[string]bool  // of these topics; nil when not isolating
	// parked says whether an event's aggregate is parked (--on-poison=park;
	// nil otherwise): a lookup in the sink's parked set (park.go).
	parked func(topic string, key []byte, pos kafkastate.Pos) bool
}

// gate returns what admission knows for a part whose refused topics are
// refused. Called from the producing goroutine.
func (s *Sink) gate(refused map[string]error) gate {
	g := gate{halt: s.cfg.OnPoison == OnPoisonHalt, refused: refused, caps: s.known, partitions: s.partitions, isoThrough: s.isoThrough}
	if m := s.isoTopics.Load(); m != nil {
		g.isoTopics = *m
	}
	if s.parks != nil {
		g.parked = func(topic string, key []byte, pos kafkastate.Pos) bool {
			return s.parks.lookup(s.deps.Source, topic, key, pos)
		}
	}
	return g
}

// admit decides what becomes of event ev of part tx. r is its record
// (nil when ev.Err is set); recounted says that ev's topic's partitions
// were counted again after admit asked for it.
func (g *gate) admit(tx *decode.Tx, ev *decode.Event, r *kgo.Record, recounted bool) verdict {
	var v verdict
	switch {
	case ev.Err != nil:
		v = verdict{cause: causePoison, why: ev.Err, reason: ev.Reason}
	case g.refused[r.Topic] != nil:
		why := g.refused[r.Topic]
		v = verdict{cause: causeTopicRefused, why: why, reason: deadLetterReason(why)}
	case ev.HasPartition && ev.Partition >= g.partitions[ev.Topic]:
		// N.B. the topic is described again first, in case partitions
		// were added since it was checked.
		if !recounted {
			return verdict{outcome: recount}
		}
		// N.B. Debezium's Connect producer fails its task at such a record
		// ("Invalid partition given with record"); here it is a poison event:
		// dead-lettered, or it halts the relay (--on-poison).
		n := g.partitions[ev.Topic]
		why := fmt.Errorf("%w: partition column gives partition %d, and topic %s has %d partitions (0 to %d)", decode.ErrBadValue, ev.Partition, ev.Topic, n, n-1)
		v = verdict{cause: causeBadPartition, why: why, reason: decode.Reason(why)}
	case loneBatchBytes(r) > int(g.caps[r.Topic]):
		// N.B. too large for its topic on its own, so in any batch:
		// the client would fail it alone (kerr.MessageTooLarge).
		why := tooLargeErr(r.Topic, loneBatchBytes(r), g.caps[r.Topic])
		v = verdict{cause: causeTooLarge, why: why, reason: deadLetterReason(why)}
	case tx.CommitLSN <= g.isoThrough && g.isoTopics[r.Topic]:
		return verdict{outcome: isolate}
	default:
		return verdict{outcome: produce}
	}
	v.outcome = deadLetter
	if g.halt {
		v.outcome = halt
	}
	return v
}

// deadLetterReason is the walrelay.error.class of the dead letter of a
// record that cannot go to its topic (err).
func deadLetterReason(err error) string {
	switch {
	case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
		return "too_large"
	case errors.Is(err, ErrTopicNotAllowed):
		return ReasonTopicNotAllowed
	case errors.Is(err, ErrTopicLimit):
		return ReasonTopicLimit
	}
	return "rejected_by_broker"
}

// park applies --on-poison=park to verdict v of event ev at pos: an event
// of a parked aggregate is dead-lettered behind it, whatever it is; a
// poison event with an aggregate parks it. An event without a key (or a
// topic) names no aggregate: v stands.
func (g *gate) park(v verdict, ev *decode.Event, pos kafkastate.Pos) verdict {
	if g.parked == nil || v.outcome == recount || len(ev.Key) == 0 || ev.Topic == "" {
		return v
	}
	switch {
	case g.parked(ev.Topic, ev.Key, pos):
		v.outcome = parkBehind
	case v.outcome == deadLetter:
		v.outcome = parkNew
	}
	return v
}
