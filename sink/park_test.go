package sink

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decode"
	"github.com/walrelay/walrelay/kafkastate"
)

// TestGatePark: --on-poison=park on admission's verdicts, with the parked
// set a lookup: a poison event with an aggregate parks it, an event of a
// parked aggregate goes behind it whatever it is, an event without a key
// or topic is dead-lettered as before, and an event before the one that
// parked its aggregate (a replay) flows.
func TestGatePark(t *testing.T) {
	start := kafkastate.Pos{LSN: 100, Index: 2}
	parked := func(topic string, key []byte, pos kafkastate.Pos) bool {
		return topic == "t" && string(key) == "K" && pos.Compare(start) >= 0
	}
	bad := verdict{outcome: deadLetter, cause: causePoison, why: errors.New("x"), reason: "bad_value"}
	ok := verdict{outcome: produce}
	for _, c := range []struct {
		name  string
		v     verdict
		topic string
		key   string
		pos   kafkastate.Pos
		want  outcome
	}{
		{"poison parks its aggregate", bad, "t", "other", start, parkNew},
		{"good event of a parked aggregate", ok, "t", "K", kafkastate.Pos{LSN: 100, Index: 3}, parkBehind},
		{"poison event of a parked aggregate", bad, "t", "K", kafkastate.Pos{LSN: 200}, parkBehind},
		{"isolated event of a parked aggregate", verdict{outcome: isolate}, "t", "K", kafkastate.Pos{LSN: 200}, parkBehind},
		{"replayed event before the first", ok, "t", "K", kafkastate.Pos{LSN: 100, Index: 1}, produce},
		{"same key, other topic", ok, "u", "K", kafkastate.Pos{LSN: 200}, produce},
		{"poison without a key", bad, "t", "", start, deadLetter},
		{"poison without a topic", bad, "", "K", start, deadLetter},
		{"recount first", verdict{outcome: recount}, "t", "K", kafkastate.Pos{LSN: 200}, recount},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gate{parked: parked}
			ev := &decode.Event{Topic: c.topic, Key: []byte(c.key)}
			if got := g.park(c.v, ev, c.pos); got.outcome != c.want {
				t.Fatalf("outcome %d, want %d", got.outcome, c.want)
			}
		})
	}
	// Parking off: the verdict stands.
	g := gate{}
	if got := g.park(bad, &decode.Event{Topic: "t", Key: []byte("K")}, start); got.outcome != deadLetter {
		t.Fatalf("without parking: outcome %d, want deadLetter", got.outcome)
	}
}

// TestParkSetMark: the first mark starts an episode at its position,
// later ones move Through forward only (a replay never moves it back), and
// a release through Through un-parks; a mark after the release starts a
// new episode.
func TestParkSetMark(t *testing.T) {
	var p parkSet
	src := kafkastate.Source{SystemID: "1", Database: "d", Slot: "s"}
	agg := kafkastate.Agg(src, "t", []byte("K"))
	at := func(lsn uint64, i uint32) kafkastate.Pos { return kafkastate.Pos{LSN: pglogreplLSN(lsn), Index: i} }
	k := p.mark(agg, at(10, 0), "id1", "too_large", "", timeZero)
	if k.Start != at(10, 0) || k.Through != at(10, 0) || !p.lookup(src, "t", []byte("K"), at(10, 1)) {
		t.Fatalf("first mark: %+v", k)
	}
	p.mark(agg, at(20, 0), "id2", ReasonParked, "", timeZero)
	if k = p.mark(agg, at(15, 0), "id3", ReasonParked, "", timeZero); k.Through != at(20, 0) || k.Start != at(10, 0) || k.FirstEventID != "id1" {
		t.Fatalf("replayed mark moved the episode: %+v", k)
	}
	if p.lookup(src, "t", []byte("K"), at(9, 5)) {
		t.Fatal("an event before the first is parked")
	}
	if _, err := p.state.Apply(kafkastate.ReleaseRecord("state", kafkastate.Release{Aggregate: agg, Through: at(20, 0), By: "redrive"})); err != nil {
		t.Fatal(err)
	}
	p.recount()
	if p.lookup(src, "t", []byte("K"), at(30, 0)) || p.n.Load() != 0 {
		t.Fatal("released aggregate still parked")
	}
	if k = p.mark(agg, at(40, 0), "id4", "bad_value", "", timeZero); k.Start != at(40, 0) || k.FirstEventID != "id4" || k.Events != 1 {
		t.Fatalf("new episode: %+v", k)
	}
}

var timeZero time.Time

func pglogreplLSN(n uint64) pglogrepl.LSN { return pglogrepl.LSN(n) }
