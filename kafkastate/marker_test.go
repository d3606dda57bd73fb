package kafkastate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

func TestKey(t *testing.T) {
	if got, want := Key("7312", "app", "walrelay"), "marker/7312/app/walrelay"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

// TestWriteRead: the last marker of a slot is read back to the end
// offsets, other slots' and other keys' records (the exactly-once
// checkpoints share the topic) notwithstanding; a missing topic is created
// compacted.
func TestWriteRead(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t, c)
	if _, found, err := s.Read(ctx, "1", "db", "slot"); err != nil || found {
		t.Fatalf("Read of an empty topic = found %v, %v; want none", found, err)
	}
	for _, lsn := range []string{"0/10", "0/20"} {
		if err := s.Write(ctx, Marker{Slot: "slot", Database: "db", SystemIdentifier: "1", ConfirmedLSN: lsn}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(ctx, Marker{Slot: "other", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/30"}); err != nil {
		t.Fatal(err)
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "cp", Key: []byte("checkpoint/slot"), Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m, found, err := s.Read(ctx, "1", "db", "slot")
	if err != nil || !found {
		t.Fatalf("Read = found %v, %v; want the marker", found, err)
	}
	if m.ConfirmedLSN != "0/20" || m.Version != "test" || m.UpdatedAt.IsZero() {
		t.Errorf("Read = %+v, want the last marker, 0/20, version test, a time", m)
	}
	if _, found, _ := s.Read(ctx, "2", "db", "slot"); found {
		t.Errorf("a marker of another system was taken for this one's")
	}
	adm := kadm.NewClient(s.cl)
	if _, err := CheckTopic(ctx, adm, "cp", false); err != nil {
		t.Errorf("CheckTopic of the created topic: %v", err)
	}
}

// TestTopicMustBeCompacted: a deleting topic or a missing one that may not
// be created is a setup error.
func TestTopicMustBeCompacted(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	del := "delete"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &del}, "deleting"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ topic string }{{"deleting"}, {"missing"}} {
		_, err := Open(ctx, Config{Brokers: c.ListenAddrs(), Topic: tc.topic}, zap.NewNop())
		if !errors.Is(err, ErrSetup) {
			t.Errorf("Open(%s) = %v, want an error wrapping ErrSetup", tc.topic, err)
		}
	}
}

// TestReadWaitsOutALeaderElection: listing the topic's end offsets while
// its partition has no leader (LEADER_NOT_AVAILABLE: a topic another
// instance just created) is tried again, and the marker is read; a make
// test's walrelay check failed on the first such answer.
func TestReadWaitsOutALeaderElection(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t, c)
	if err := s.Write(ctx, Marker{Slot: "slot", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/10"}); err != nil {
		t.Fatal(err)
	}
	refused := 0
	c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if refused == 3 {
			return nil, nil, false
		}
		c.KeepControl()
		refused++
		req := kreq.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	m, found, err := s.Read(ctx, "1", "db", "slot")
	if err != nil || !found || m.ConfirmedLSN != "0/10" {
		t.Fatalf("Read = %+v found %v, %v; want the marker 0/10 after the election", m, found, err)
	}
	if refused != 3 {
		t.Errorf("%d answers of LEADER_NOT_AVAILABLE, want 3 before the read", refused)
	}
}

// TestReadCatchesUp: a store reads the topic once, then at each Read only
// the records written since (Store.idx), tombstones included; another
// store reads it from the start.
func TestReadCatchesUp(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t, c)
	read := func(slot string) bool {
		t.Helper()
		_, found, err := s.Read(ctx, "1", "db", slot)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if err := s.Write(ctx, Marker{Slot: "a", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/10"}); err != nil {
		t.Fatal(err)
	}
	if !read("a") || s.idx.records != 1 {
		t.Fatalf("after one marker: found %v, %d records read; want true, 1", read("a"), s.idx.records)
	}
	if read("a"); s.idx.records != 1 {
		t.Errorf("a Read with nothing new read %d records in all, want 1", s.idx.records)
	}
	if err := s.Write(ctx, Marker{Slot: "b", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/20"}); err != nil {
		t.Fatal(err)
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: "cp", Key: []byte(Key("1", "db", "a"))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if read("a") || !read("b") || s.idx.records != 3 {
		t.Errorf("after a marker and a tombstone: a found %v, b found %v, %d records read in all; want false, true, 3", read("a"), read("b"), s.idx.records)
	}
	if sn, err := s.ReadAll(ctx); err != nil {
		t.Error(err)
	} else if sn.Len() != 1 {
		t.Errorf("ReadAll = %d markers, want 1 (b)", sn.Len())
	}
	other := openStore(ctx, t, c)
	if _, found, err := other.Read(ctx, "1", "db", "b"); err != nil || !found || other.idx.records != 3 {
		t.Errorf("a new store: b found %v (%v), %d records read; want true, 3", found, err, other.idx.records)
	}
}
