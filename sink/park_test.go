package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/checkpoint"
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
// later ones move Through forward only (a replay never moves it back nor
// counts its event again), and
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
	if k = p.mark(agg, at(15, 0), "id3", ReasonParked, "", timeZero); k.Through != at(20, 0) || k.Start != at(10, 0) || k.FirstEventID != "id1" || k.Events != 2 {
		t.Fatalf("replayed mark moved the episode or counted its event again: %+v", k)
	}
	if k = p.mark(agg, at(20, 0), "id2", ReasonParked, "", timeZero); k.Events != 2 {
		t.Fatalf("the newest parked event relayed again counted twice: %+v", k)
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

// TestBatchRejectionParksTheAggregate: with --on-poison=park, the record
// Kafka rejects on its own, found by producing its topic's records one at
// a time after the restart, parks its aggregate: the aggregate's later
// event is dead-lettered behind it, the other aggregate's events are
// produced, and the park record is on the state topic. (kfake: the
// broker's rejection of one record; the real broker's is in
// test/e2e/park_rejected_test.go.)
func TestBatchRejectionParksTheAggregate(t *testing.T) {
	c := newCluster(t)
	rejectKey(t, c, "strict", []byte("bad-key"), kerr.InvalidRecord.Code)
	iso := NewIsolation()
	setup := func(cfg *sinkSetup) { cfg.Compression = "none"; cfg.Isolation = iso; cfg.TopicPartitions = 1 }
	txs := []*decode.Tx{
		tx(1, start+100, event("strict", "k1", "id1")),
		tx(2, start+200, event("strict", "k1", "id2"), event("strict", "bad-key", "id-bad"), event("strict", "k1", "id3")),
		tx(3, start+300, event("strict", "bad-key", "id-behind"), event("strict", "k1", "id4")),
	}
	s1, tr1 := newSink(t, c, OnPoisonPark, time.Minute, setup)
	for _, x := range txs {
		if err := s1.Produce(context.Background(), x); err != nil && !errors.Is(err, ErrBatchRejected) {
			t.Fatal(err)
		}
	}
	if err := waitFailed(t, s1); !errors.Is(err, ErrBatchRejected) {
		t.Fatalf("first sink: %v, want ErrBatchRejected", err)
	}
	confirmed := tr1.Watermark()
	s1.Close()

	s2, _ := newSink(t, c, OnPoisonPark, time.Minute, setup, func(cfg *sinkSetup) { cfg.Tracker = checkpoint.New(confirmed) })
	ctx := context.Background()
	for _, x := range txs {
		if x.EndLSN <= confirmed {
			continue
		}
		if err := s2.Produce(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s2.tracker.Watermark(); got != start+300 {
		t.Errorf("watermark %s, want %s", got, start+300)
	}
	var got []string
	for _, r := range readAll(t, c, "strict", -1) {
		got = append(got, header(r, "id"))
	}
	if strings.Contains(strings.Join(got, ","), "bad") || strings.Contains(strings.Join(got, ","), "behind") || !strings.Contains(strings.Join(got, ","), "id4") {
		t.Errorf("topic holds %v: want k1's events only", got)
	}
	byID := map[string]*kgo.Record{}
	for _, r := range readAll(t, c, "walrelay.dlq", -1) {
		byID[header(r, HeaderEventID)] = r
	}
	bad, behind := byID["id-bad"], byID["id-behind"]
	if bad == nil || behind == nil || len(byID) != 2 {
		t.Fatalf("dead letters %v, want id-bad and id-behind", byID)
	}
	if header(bad, HeaderErrorClass) != "rejected_by_broker" || header(behind, HeaderErrorClass) != ReasonParked ||
		header(behind, HeaderParkedBehind) != "id-bad" || header(behind, HeaderOriginalHeaders) == "" || header(bad, HeaderParkedAggregate) == "" {
		t.Errorf("dead letters' headers: bad %v, behind %v", bad.Headers, behind.Headers)
	}
	var parks []string
	for _, r := range readAll(t, c, DefaultCheckpointTopic, -1) {
		if strings.HasPrefix(string(r.Key), kafkastate.ParkPrefix) {
			parks = append(parks, string(r.Value))
		}
	}
	if len(parks) != 2 || !strings.Contains(parks[1], `"first_event_id":"id-bad"`) || !strings.Contains(parks[1], `"events":2`) {
		t.Errorf("park records %q, want two, the second through id-behind", parks)
	}
}
