package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/kafkastate"
)

// TestSharedMarkersSnapshotOnce: a relay's first answer about its slot's
// marker comes from the fleet's read of the topic, every later one from
// Kafka (or from what it remembered), and the shared store is not closed
// with the relay.
func TestSharedMarkersSnapshotOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := kafkastate.Open(ctx, kafkastate.Config{Brokers: c.ListenAddrs(), Topic: "cp", CreateTopic: true, ReplicationFactor: -1}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Write(ctx, kafkastate.Marker{Slot: "a", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/10"}); err != nil {
		t.Fatal(err)
	}
	sn, err := st.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Written after the read: the snapshot does not have them.
	for _, m := range []kafkastate.Marker{
		{Slot: "a", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/20"},
		{Slot: "b", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/30"},
	} {
		if err := st.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(h *history, slot string) (string, bool) {
		t.Helper()
		lsn, _, found, err := h.LastConfirmed(ctx, "1", "db", slot)
		if err != nil {
			t.Fatal(err)
		}
		return lsn.String(), found
	}
	var a history
	a.useShared(&SharedMarkers{Store: st, Snapshot: sn})
	if lsn, found := ask(&a, "a"); !found || lsn != "0/10" {
		t.Errorf("slot a, first answer: %s %v, want the snapshot's 0/10", lsn, found)
	}
	if lsn, found := ask(&a, "a"); !found || lsn != "0/10" {
		t.Errorf("slot a, second answer: %s %v, want 0/10 remembered", lsn, found)
	}
	var b history
	b.useShared(&SharedMarkers{Store: st, Snapshot: sn})
	if _, found := ask(&b, "b"); found {
		t.Errorf("slot b, first answer: found; the snapshot has no marker of it")
	}
	if lsn, found := ask(&b, "b"); !found || lsn != "0/30" {
		t.Errorf("slot b, second answer: %s %v, want Kafka's 0/30", lsn, found)
	}
	var stale history
	old := *sn
	old.At = time.Now().Add(-2 * snapshotFresh)
	stale.useShared(&SharedMarkers{Store: st, Snapshot: &old})
	if lsn, found := ask(&stale, "a"); !found || lsn != "0/20" {
		t.Errorf("slot a from a stale snapshot: %s %v, want Kafka's 0/20", lsn, found)
	}
	a.close()
	if err := st.Write(ctx, kafkastate.Marker{Slot: "c", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/40"}); err != nil {
		t.Errorf("the shared store after a relay closed its history: %v", err)
	}
}
