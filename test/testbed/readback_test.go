package testbed_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/test/testbed"
)

// fakeTopic is a kfake broker with topic t of 3 partitions holding 10
// records each.
func fakeTopic(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 3), Value: []byte{byte(i)}})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c
}

// answerListOffsets makes c answer the next n ListOffsets requests with
// answer (a response, or an error: the connection closed), and counts
// them.
func answerListOffsets(c *kfake.Cluster, n int32, answer func(*kmsg.ListOffsetsRequest) (kmsg.Response, error)) *atomic.Int32 {
	var seen atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if seen.Add(1) > n {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		resp, err := answer(req.(*kmsg.ListOffsetsRequest))
		return resp, err, true
	})
	return &seen
}

// noPartitions answers a ListOffsets request without any of its partitions.
func noPartitions(req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Version = req.Version
	return resp, nil
}

// TestReadToEndListsAgainAnAnswerWithoutPartitions: a broker whose
// ListOffsets answer leaves the topic's partitions out (as one whose
// partitions have no leader yet) does not make the topic empty: the
// reader lists again and reads every record. Before: 0 of 30 records, no
// error (the fleet's fault test read none of a pipeline's 3,741 events).
func TestReadToEndListsAgainAnAnswerWithoutPartitions(t *testing.T) {
	t.Parallel()
	c := fakeTopic(t)
	seen := answerListOffsets(c, 2, noPartitions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, c.ListenAddrs(), []string{"t"}, testbed.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 30 || seen.Load() < 3 {
		t.Errorf("read %d records (ListOffsets asked %d times), want all 30 after the two answers without partitions", len(recs), seen.Load())
	}
}

// TestListEndOffsetsRetriesFailedShards: a ListOffsets request that fails
// (the connection closed) is a failed shard in kadm; its partitions are
// listed again, never left out. Before: an empty listing and no error.
func TestListEndOffsetsRetriesFailedShards(t *testing.T) {
	t.Parallel()
	c := fakeTopic(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	answerListOffsets(c, 2, func(*kmsg.ListOffsetsRequest) (kmsg.Response, error) { return nil, errors.New("closed") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := testbed.ListEndOffsets(ctx, cl, false, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := ends["t"]; len(got) != 3 || got[0] != 10 || got[1] != 10 || got[2] != 10 {
		t.Errorf("end offsets %v, want 10 on each of t's 3 partitions", ends)
	}
}

// TestReadToEndFailsWhenNeverListed: a topic whose end offsets are never
// listed fails the read when its context ends, saying so; it is never an
// empty topic read to its end.
func TestReadToEndFailsWhenNeverListed(t *testing.T) {
	t.Parallel()
	c := fakeTopic(t)
	answerListOffsets(c, 1<<30, noPartitions)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, c.ListenAddrs(), []string{"t"}, testbed.ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "not in the broker's answer") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReadToEnd: %d records, error %v; want an error naming the partitions not listed", len(recs), err)
	}
}

// TestReadToEndExistRefusesAnUnknownTopic: a topic the broker does not
// know is counted empty and Absent says so; with Exist, it is waited for
// and the read fails when its context ends, saying so. Against the bed's
// Kafka.
func TestReadToEndExistRefusesAnUnknownTopic(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	topic := "readback.unknown." + time.Now().Format("150405.000000000")
	var absent []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, b.Brokers(), []string{topic}, testbed.ReadOptions{Absent: func(s string) { absent = append(absent, s) }})
	if err != nil || len(recs) != 0 || len(absent) != 1 || absent[0] != topic {
		t.Fatalf("without Exist: %d records, error %v, absent %v; want none, no error, and %s absent", len(recs), err, absent, topic)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, _, err = testbed.ReadToEnd(ctx, b.Brokers(), []string{topic}, testbed.ReadOptions{Exist: true})
	if err == nil || !strings.Contains(err.Error(), "the broker does not know ["+topic+"]: nothing read from it") {
		t.Errorf("with Exist: %d records, error %v; want an error saying the topic is unknown", len(recs), err)
	}
}
