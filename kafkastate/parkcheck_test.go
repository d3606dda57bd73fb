package kafkastate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconn"
)

// TestPreflightParked: walrelay check's parked-aggregates check passes with
// a note when the state topic does not exist yet, and warns about each
// aggregate parked (not one a release covers) once it does.
func TestPreflightParked(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := PreflightParked("state", c.ListenAddrs(), kafkaconn.Conn{})
	if ch := check(ctx, nil); ch.Err != nil || !strings.Contains(ch.Note, "does not exist") {
		t.Fatalf("missing topic: %+v", ch)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "state"); err != nil {
		t.Fatal(err)
	}
	k := Aggregate{SystemID: "1", Database: "d", Slot: "s", Topic: "t", Key: []byte("K")}
	l := k
	l.Key = []byte("L")
	recs := []*kgo.Record{
		ParkRecord("state", Park{Aggregate: k, Start: Pos{LSN: 1}, Through: Pos{LSN: 2}, FirstEventID: "e1", Reason: "too_large", ParkedAt: time.Now()}),
		ParkRecord("state", Park{Aggregate: l, Start: Pos{LSN: 1}, Through: Pos{LSN: 2}, FirstEventID: "e2", Reason: "bad_value", ParkedAt: time.Now()}),
		ReleaseRecord("state", Release{Aggregate: l, Through: Pos{LSN: 2}, By: "redrive"}),
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ch := check(ctx, nil)
	if ch.Err != nil || ch.Note != "1 parked" || len(ch.Warnings) != 1 || !strings.Contains(ch.Warnings[0], "key K) parked for") || !strings.Contains(ch.Warnings[0], "behind event e1 (too_large)") {
		t.Fatalf("one parked aggregate: %+v", ch)
	}
}
