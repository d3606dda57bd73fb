package kafkastate

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPos: the text form round-trips and orders by LSN, then index.
func TestPos(t *testing.T) {
	p, err := ParsePos("16/B374D848:3")
	if err != nil || p.LSN != 0x16B374D848 || p.Index != 3 || p.String() != "16/B374D848:3" {
		t.Fatalf("ParsePos: %v %v", p, err)
	}
	for _, bad := range []string{"", "16/B374D848", "x:1", "0/1:-1"} {
		if _, err := ParsePos(bad); err == nil {
			t.Errorf("ParsePos(%q): no error", bad)
		}
	}
	if (Pos{LSN: 1, Index: 9}).Compare(Pos{LSN: 2}) != -1 || (Pos{LSN: 2, Index: 1}).Compare(Pos{LSN: 2}) != 1 || (Pos{LSN: 2}).Compare(Pos{LSN: 2}) != 0 {
		t.Fatal("Compare")
	}
}

// TestParkStateFold: parked while the park record is past the release;
// a release through it un-parks, a park record after it parks again;
// another slot's records and other keys are left out; tombstones forget.
func TestParkStateFold(t *testing.T) {
	st := ParkState{Prefix: ParkSlotPrefix("1", "d", "s")}
	agg := Aggregate{SystemID: "1", Database: "d", Slot: "s", Topic: "t", Key: []byte{0xff, 'K'}}
	other := agg
	other.Slot = "s2"
	apply := func(r *kgo.Record) string {
		t.Helper()
		id, err := st.Apply(r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	park := func(a Aggregate, through uint64) *kgo.Record {
		return ParkRecord("x", Park{Aggregate: a, Start: Pos{LSN: 10}, Through: Pos{LSN: pglogrepl.LSN(through)}})
	}
	if id := apply(park(other, 10)); id != "" {
		t.Fatalf("another slot's record applied: %q", id)
	}
	if id := apply(&kgo.Record{Key: []byte("marker/1/d/s")}); id != "" {
		t.Fatal("a marker applied")
	}
	id := apply(park(agg, 20))
	if id != agg.ID() || !st.Get(id).IsParked() {
		t.Fatalf("park: %q %+v", id, st.Get(id))
	}
	apply(ReleaseRecord("x", Release{Aggregate: agg, Through: Pos{LSN: 10}}))
	if !st.Get(id).IsParked() {
		t.Fatal("a release short of Through un-parked")
	}
	apply(ReleaseRecord("x", Release{Aggregate: agg, Through: Pos{LSN: 20}}))
	if st.Get(id).IsParked() {
		t.Fatal("a release through Through left it parked")
	}
	apply(park(agg, 30))
	if !st.Get(id).IsParked() {
		t.Fatal("a park after the release did not park")
	}
	apply(&kgo.Record{Key: []byte(ParkPrefix + id)})
	apply(&kgo.Record{Key: []byte(ReleasePrefix + id)})
	if st.Get(id) != nil || len(st.All()) != 0 {
		t.Fatal("tombstones kept the aggregate")
	}
}
