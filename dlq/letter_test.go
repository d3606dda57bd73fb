package dlq

import (
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/kafkastate"
	"github.com/walrelay/walrelay/sink"
)

// parked is a parked dead letter of aggregate agg at pos, at offset off,
// as the relay writes it: the record's own headers (id) first.
func parked(agg kafkastate.Aggregate, pos kafkastate.Pos, off int64, redrivable bool) *kgo.Record {
	h := []kgo.RecordHeader{{Key: "id", Value: []byte(fmt.Sprint("e-", pos))}}
	if redrivable {
		h = append(h, kgo.RecordHeader{Key: sink.HeaderOriginalHeaders, Value: []byte("1")})
	}
	h = append(h,
		kgo.RecordHeader{Key: sink.HeaderTopic, Value: []byte(agg.Topic)},
		kgo.RecordHeader{Key: sink.HeaderErrorClass, Value: []byte(sink.ReasonParked)},
		kgo.RecordHeader{Key: sink.HeaderParkedAggregate, Value: []byte(agg.ID())},
		kgo.RecordHeader{Key: sink.HeaderPosition, Value: []byte(pos.String())})
	return &kgo.Record{Topic: "dlq", Key: agg.Key, Value: []byte(pos.String()), Headers: h, Offset: off}
}

// TestPendingLetters: a redrive takes the aggregate's parked dead letters
// after its last release and through the newest parked position, once
// per position (a replay dead-letters an event again), in position order,
// whatever their order in the topic.
func TestPendingLetters(t *testing.T) {
	agg := kafkastate.Aggregate{SystemID: "1", Database: "d", Slot: "s", Topic: "t", Key: []byte("K")}
	other := agg
	other.Key = []byte("L")
	at := func(l uint64) kafkastate.Pos { return kafkastate.Pos{LSN: pglsn(l)} }
	recs := []*kgo.Record{
		parked(agg, at(10), 0, true), parked(agg, at(30), 1, true), parked(agg, at(20), 2, true),
		parked(agg, at(30), 3, true),                                                                // replayed
		parked(other, at(25), 4, true), parked(agg, at(40), 5, false), parked(agg, at(50), 6, true), // 50: past Through
	}
	v := &View{Parks: &kafkastate.ParkState{}}
	for _, r := range recs {
		v.Letters = append(v.Letters, decodeLetter(r))
	}
	v.Parks.SetPark(agg.ID(), &kafkastate.Park{Aggregate: agg, Start: at(10), Through: at(40)})
	got := func() string {
		var s []string
		for _, l := range pendingLetters(v, agg.ID()) {
			s = append(s, fmt.Sprintf("%s/%v", l.Pos, l.Redrivable))
		}
		return fmt.Sprint(s)
	}
	if want := "[0/A:0/true 0/14:0/true 0/1E:0/true 0/28:0/false]"; got() != want {
		t.Fatalf("pending %s, want %s", got(), want)
	}
	if _, err := v.Parks.Apply(kafkastate.ReleaseRecord("state", kafkastate.Release{Aggregate: agg, Through: at(20)})); err != nil {
		t.Fatal(err)
	}
	if want := "[0/1E:0/true 0/28:0/false]"; got() != want {
		t.Fatalf("after a release through 0/14: pending %s, want %s", got(), want)
	}
	l := pendingLetters(v, agg.ID())[0]
	o := l.Original()
	if o.Topic != "t" || string(o.Key) != "K" || len(o.Headers) != 1 || o.Headers[0].Key != "id" || o.Partition != -1 || string(o.Value) != "0/1E:0" {
		t.Fatalf("Original: %+v", o)
	}
}

func pglsn(n uint64) pglogrepl.LSN { return pglogrepl.LSN(n) }
