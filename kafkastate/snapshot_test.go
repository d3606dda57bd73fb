package kafkastate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReadAll: one read answers for every slot as Read and LastConfirmed
// do: the last marker of each, none after a tombstone, an unfinished
// recovery refused.
func TestReadAll(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t, c)
	empty, err := s.ReadAll(ctx)
	if err != nil || empty.Len() != 0 {
		t.Fatalf("ReadAll of an empty topic = %v, %v; want no marker", empty, err)
	}
	for _, m := range []Marker{
		{Slot: "a", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/10"},
		{Slot: "a", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/20"},
		{Slot: "b", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/30"},
		{Slot: "gone", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/40"},
		{Slot: "rec", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/50", Recovery: &Recovery{Kind: "recover", StartedAt: time.Now()}},
	} {
		if err := s.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "cp", Key: []byte(Key("1", "db", "gone"))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sn, err := s.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		slot  string
		lsn   string
		found bool
	}{{"a", "0/20", true}, {"b", "0/30", true}, {"gone", "", false}, {"none", "", false}} {
		lsn, at, found, err := sn.LastConfirmed("1", "db", tc.slot)
		if err != nil || found != tc.found || found && (lsn.String() != tc.lsn || at.IsZero()) {
			t.Errorf("slot %s: LastConfirmed = %s %v %v %v, want %s found %v", tc.slot, lsn, at, found, err, tc.lsn, tc.found)
		}
		rlsn, _, rfound, rerr := s.LastConfirmed(ctx, "1", "db", tc.slot)
		if rlsn != lsn || rfound != found || rerr != nil {
			t.Errorf("slot %s: the snapshot says %s %v, a read %s %v %v", tc.slot, lsn, found, rlsn, rfound, rerr)
		}
	}
	if _, _, found, err := sn.LastConfirmed("1", "db", "rec"); found || !errors.Is(err, ErrRecoveryUnfinished) {
		t.Errorf("an unfinished recovery: found %v, %v; want ErrRecoveryUnfinished", found, err)
	}
	if _, _, found, _ := sn.LastConfirmed("2", "db", "a"); found {
		t.Errorf("a marker of another system was taken for this one's")
	}
}
